"""Weighted (atom-balanced) steps: a step's ids re-dealt among ranks so their summed weights are
about equal, within windows of consecutive ranks.

Inside a window of ``w`` ranks the step's ``w b`` ids are sorted heaviest first and dealt in
serpentine rounds (ranks 0..w-1, then w-1..0, ...): every rank keeps ``b`` ids, and each round's
imbalance is at most the spread of that round's weights, so the window's totals differ by at most
about one sample's weight. The ids of a step, and so of an epoch, do not change, only which rank
of the window takes which.

Why windows: balancing over all ``P`` ranks sorts the world's ``P b`` ids every step on every rank
(``O(P b log P b)``: ~10 ms at 8,192 ranks). A window costs ``O(w b log w b)`` for a rank's own
row; an owner serving the collective backend deals only the windows its own ids fall in this step
(at most ``b``). Windows are aligned (ranks ``[k w, (k+1) w)``; the last may be shorter). With
``P <= w`` the window is the world: the plans are exactly the whole-world balance of before.
How close windows come to the whole-world balance is measured in bench/rank_cost.py (the
``balance`` rows: max over mean of per-rank weight, windows against the world).
"""

from __future__ import annotations

import numpy as np

BALANCE_WINDOW = 16  # ranks a balance window


def window_of(rank: int, world_size: int, window: int) -> tuple[int, int]:
    """The world ranks ``[first, end)`` of the balance window holding `rank`."""
    first = rank - rank % window
    return first, min(first + window, world_size)


def balance_plan(plan: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Re-deal a ``[w, b]`` step's ids so every rank keeps ``b`` ids with about equal weight
    (serpentine deal of the ids sorted heaviest first; module doc). O(w b log w b)."""
    ranks, b = plan.shape
    if ranks == 1 or b == 0:
        return plan
    ids = plan.reshape(-1)
    deal = ids[np.argsort(-weights[ids], kind="stable")].reshape(b, ranks)
    deal[1::2] = deal[1::2, ::-1]
    return np.ascontiguousarray(deal.T)


def deal_windows(rows: np.ndarray, weights: np.ndarray, window: int) -> np.ndarray:
    """:func:`balance_plan` applied to each run of `window` consecutive rows of `rows` (``[R,
    b]``, whole aligned windows; the last run may be shorter), all full windows at once."""
    r, b = rows.shape
    if r == 0 or b == 0 or window <= 1:
        return rows
    full = (r // window) * window
    out = np.empty_like(rows)
    if full:
        ids = rows[:full].reshape(full // window, window * b)
        order = np.argsort(-weights[ids], axis=1, kind="stable")
        deal = np.take_along_axis(ids, order, axis=1).reshape(-1, b, window)
        deal[:, 1::2] = deal[:, 1::2, ::-1]
        out[:full] = deal.transpose(0, 2, 1).reshape(full, b)
    if full < r:
        out[full:] = balance_plan(rows[full:], weights)
    return out
