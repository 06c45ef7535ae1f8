"""Weighted (atom-balanced) steps: a step's ids re-dealt among ranks so their summed weights are
about equal, within blocks of a window of consecutive ranks and a few consecutive columns.

A step's plan is ``[P, b]`` ids (rank, column). Ranks form aligned windows of ``w`` ranks
(``[k w, (k+1) w)``, the last may be shorter); a window's ``b`` columns form blocks of ``g``
consecutive columns (the last may be narrower). A block's ``w g`` ids are sorted heaviest first
(ties: column, then rank) and dealt in serpentine rounds: the ``k``-th heaviest goes in round
``i = k // w`` to window rank ``j = k % w`` (``w-1-j`` in odd rounds), turned by the block's
number ``t`` (rank ``(j + t) mod w``), and keeps column ``t g + i``. Every rank keeps one id a
column; a block's rounds even its ranks out, and turning the deal each block spreads the
heaviest rounds over the window's ranks. The ids of a step, and so of an epoch, do not change,
only which rank of the window takes which.

Why blocks: the owner of an id serving the collective backend must know which rank takes it,
and so must read the weights of the id's whole block: ``w g`` ids for each of its ``~b`` own ids a
step (``b w g`` = 2,048 with the defaults), at any number of ranks. Whole-window deals
(``g = b``: ``w b^2`` = 16,384 a step) cost 3x the 64-rank plan at 8,192 ranks; balancing over
all ``P`` ranks sorts the world's ``P b`` ids every step on every rank (~10 ms at 8,192).
How close blocks come to the whole-world balance (max over mean of per-rank weight) is measured
in bench/estimator/rank_cost.py (the ``balance`` rows: blocks, whole windows and the world).
"""

from __future__ import annotations

import functools

import numpy as np

BALANCE_WINDOW = 16  # ranks a balance window
BALANCE_COLUMNS = 4  # columns a balance block


def window_of(rank: int, world_size: int, window: int) -> tuple[int, int]:
    """The world ranks ``[first, end)`` of the balance window holding `rank`."""
    first = rank - rank % window
    return first, min(first + window, world_size)


def balance_plan(plan: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Re-deal a ``[w, b]`` step's ids so every rank keeps ``b`` ids with about equal weight:
    serpentine deal of ALL its ids sorted heaviest first (the whole-world reference the benches
    compare blocks with). O(w b log w b)."""
    ranks, b = plan.shape
    if ranks == 1 or b == 0:
        return plan
    ids = plan.reshape(-1)
    deal = ids[np.argsort(-weights[ids], kind="stable")].reshape(b, ranks)
    deal[1::2] = deal[1::2, ::-1]
    return np.ascontiguousarray(deal.T)


def block_place(k: np.ndarray, width: int, block: int, columns: int):
    """``(rank in window, column)`` of the `k`-th heaviest id of block number `block` of a window
    `width` ranks wide (module doc)."""
    i, j = k // width, k % width
    j = np.where(i % 2 == 0, j, width - 1 - j)
    return (j + block) % width, block * columns + i


def deal_blocks(rows: np.ndarray, weights: np.ndarray, window: int,
                columns: int = BALANCE_COLUMNS) -> np.ndarray:
    """Deal each block of `rows` (``[R, L]``: whole aligned windows of `window` rows, the last
    run may be shorter; blocks of `columns` columns, the last may be narrower), module doc.
    Full windows and full blocks at once, then the short window and the short block."""
    r, n = rows.shape
    if r == 0 or n == 0:
        return rows
    out = np.empty_like(rows)
    full = r - r % window
    if full:
        _deal_run(rows[:full], out[:full], weights, window, columns)
    if full < r:
        _deal_run(rows[full:], out[full:], weights, r - full, columns)
    return out


def _deal_run(rows, out, weights, width, columns):
    """Deal `rows` (``[k width, L]``, windows of `width` rows) into `out`: each block's ids
    sorted heaviest first, blocks one after another, then one gather
    (:func:`_gather_positions`)."""
    r, n = rows.shape
    nw, nb = r // width, n // columns
    parts = []
    if nb:  # full blocks of all windows at once: [window, block, column-in-block x rank]
        c = nb * columns
        ids = rows[:, :c].reshape(nw, width, nb, columns).transpose(0, 2, 3, 1) \
            .reshape(nw, nb, columns * width)
        ids = np.take_along_axis(ids, np.argsort(-weights[ids], axis=2, kind="stable"), axis=2)
        parts.append(ids.reshape(nw, c * width))
    if n % columns:  # the narrower last block (a short last step)
        ids = rows[:, nb * columns:].reshape(nw, width, n % columns).transpose(0, 2, 1) \
            .reshape(nw, -1)
        parts.append(np.take_along_axis(ids, np.argsort(-weights[ids], axis=1, kind="stable"),
                                        axis=1))
    dealt = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
    out.reshape(nw, width * n)[:] = dealt[:, _gather_positions(width, n, columns)]


@functools.lru_cache(maxsize=64)
def _gather_positions(width: int, n: int, columns: int) -> np.ndarray:
    """For a window's ``[width, n]`` row-major output: the position of each entry in the
    blocks' sorted ids laid end to end (block ``t``'s ``k``-th heaviest at ``t columns width +
    k``)."""
    dest = np.empty(width * n, dtype=np.int64)
    for t, c0 in enumerate(range(0, n, columns)):
        m = min(columns, n - c0) * width
        j, col = block_place(np.arange(m), width, t, columns)
        dest[c0 * width:c0 * width + m] = j * n + col
    src = np.empty_like(dest)
    src[dest] = np.arange(dest.size)
    src.flags.writeable = False
    return src
