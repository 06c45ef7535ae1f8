"""The block deal of weighted steps (sampling/balance.py) against its definition written as plain
loops, on windows and blocks of every shape (short last window, narrower last block)."""

import numpy as np
import pytest

from mdloader_plugin.sampling.balance import balance_plan, deal_blocks


def deal_by_definition(rows, weights, window, columns):
    """The module doc's deal, one block at a time: sort heaviest first (ties: column, then rank),
    round ``i = k // w``, rank ``j = k % w`` (reversed in odd rounds), turned by the block."""
    r, n = rows.shape
    out = np.full_like(rows, -1)
    for w0 in range(0, r, window):
        w = min(window, r - w0)
        for t, c0 in enumerate(range(0, n, columns)):
            entries = [(-int(weights[rows[w0 + j, c]]), c, j, rows[w0 + j, c])
                       for c in range(c0, min(c0 + columns, n)) for j in range(w)]
            for k, (_, _, _, sample) in enumerate(sorted(entries, key=lambda e: e[:3])):
                i, j = divmod(k, w)
                j = j if i % 2 == 0 else w - 1 - j
                out[w0 + (j + t) % w, t * columns + i] = sample
    return out


@pytest.mark.parametrize("r,n,window,columns", [
    (16, 32, 16, 4), (35, 32, 16, 4), (7, 5, 16, 4), (12, 9, 5, 2), (10, 7, 3, 3), (4, 4, 2, 8),
    (1, 6, 16, 4), (32, 1, 16, 4), (9, 10, 3, 1)])
def test_deal_is_its_definition(r, n, window, columns):
    rng = np.random.default_rng(r * 100 + n)
    weights = rng.integers(1, 6, 2000)  # few values: many ties
    rows = rng.permutation(2000)[:r * n].reshape(r, n)
    out = deal_blocks(rows, weights, window, columns)
    assert np.array_equal(out, deal_by_definition(rows, weights, window, columns))
    for w0 in range(0, r, window):  # every window keeps its ids, and each column's
        win, got = rows[w0:w0 + window], out[w0:w0 + window]
        for c0 in range(0, n, columns):
            block = slice(c0, c0 + columns)
            assert sorted(win[:, block].ravel()) == sorted(got[:, block].ravel())


@pytest.mark.parametrize("kind", ["normal", "bimodal"])
def test_blocks_balance_close_to_whole_windows(kind):
    """Max over mean of the per-rank weight a step over 4,096 ranks (what the slowest rank
    costs): blocks of 4 columns remove most of the unbalanced excess and stay near the serpentine
    deal of whole windows (bench/estimator/rank_cost.py measures it on the benchmark's atoms)."""
    rng = np.random.default_rng(7)
    weights = np.clip(rng.normal(30, 5, 200_000), 3, None).astype(np.int64) if kind == "normal" \
        else np.concatenate([rng.integers(5, 30, 140_000), rng.integers(100, 400, 60_000)])
    rows = rng.permutation(weights.size)[:4096 * 32].reshape(4096, 32)

    def excess(table):
        per = weights[table].sum(axis=1)
        return float(per.max() / per.mean()) - 1

    whole = np.concatenate([balance_plan(rows[w0:w0 + 16], weights) for w0 in range(0, 4096, 16)])
    blocks = excess(deal_blocks(rows, weights, 16, 4))
    assert blocks < excess(rows) / 3
    assert blocks < 1.5 * excess(whole) + 0.01
    assert excess(deal_blocks(rows, weights, 16, 32)) < 1.1 * excess(whole) + 0.005
