"""Is one step series faster than another, or can the measurement not tell? (issues 15, 16)

The statistics of the benchmarks' *tie-aware* scores (``bench/estimator/backend_choice.py``,
``bench/groups/cluster.py``): a configuration's two contenders ran in interleaved rounds (back to
back,
alternating order), and a stratified Mann-Whitney test (van Elteren) over those rounds asks
whether their step distributions differ at ``ALPHA``. Comparing inside each round cancels a
drift of the machine's speed that affects both; a difference the test cannot see is a **tie**
(either pick is right), not a finding. Rank tests need no normality: steps have stalls.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ALPHA", "WITHIN", "resolve", "strata"]

ALPHA = 0.05  # significance level of the winner test (two-sided)
WITHIN = 0.03  # a pick this close to the faster (3%, issue 15's tolerance) counts as right


def strata(row: dict) -> list[dict[str, list[float]]]:
    """A row's step series cut into its interleaved rounds (one dict label -> steps a round).

    Rounds run the arms back to back in alternating order, so comparing the arms inside each
    round cancels a drift of the machine's speed that affects both. ``round_sizes`` (recorded
    since 2026-12-04) gives each round's length; an older row is cut into ``rounds`` equal
    chunks when that divides its series, and is otherwise one stratum."""
    steps = row["steps_s"]
    sizes = row.get("round_sizes") or {}
    if sizes and all(sum(sizes.get(k, [])) == len(v) for k, v in steps.items()):
        n = min(len(sizes[k]) for k in steps)
        cuts = {k: np.cumsum([0] + sizes[k][:n]) for k in steps}
        return [{k: steps[k][cuts[k][i]:cuts[k][i + 1]] for k in steps} for i in range(n)]
    rounds = int(row.get("rounds") or 0)
    if rounds > 1 and len({len(v) for v in steps.values()}) == 1:
        n = len(next(iter(steps.values())))
        if n % rounds == 0 and n // rounds >= 2:
            k = n // rounds
            return [{a: v[i * k:(i + 1) * k] for a, v in steps.items()} for i in range(rounds)]
    return [dict(steps)]


def resolve(blocks: list[dict[str, list[float]]], alpha: float = ALPHA) -> dict:
    """Do two labelled step distributions differ? `blocks` holds one dict a round (label -> that
    round's steps; :func:`strata` cuts a row into them). A stratified Mann-Whitney test (van
    Elteren: each round's rank-sum statistic, weighted 1/(n+1), normal approximation, two-sided);
    a round missing either label is left out; one round is the plain Mann-Whitney test.

    Returns ``p``, ``winner`` (the label with the lower median, or None: a **tie**, the series
    cannot tell the two apart at `alpha`), ``strata`` (rounds with both labels) and
    ``median_ratio`` (slower / faster median, all rounds pooled)."""
    from scipy.stats import norm

    from mdloader_plugin.estimator.online import rank_sum

    names = sorted({k for b in blocks for k in b})
    if len(names) != 2:
        raise ValueError(f"need exactly two labelled series, got {names}")
    a, b = names
    num = var = 0.0
    used = 0
    for blk in blocks:
        x, y = np.asarray(blk.get(a, []), float), np.asarray(blk.get(b, []), float)
        n1, n2 = x.size, y.size
        if not n1 or not n2:
            continue
        used += 1
        d, v = rank_sum(x, y)  # the online trial's statistic, weighted per round
        w = 1.0 / (n1 + n2 + 1)
        num += w * d
        var += w * w * v
    p = float(2 * norm.sf(abs(num) / np.sqrt(var))) if var > 0 else 1.0
    med = {k: float(np.median([t for blk in blocks for t in blk.get(k, [])])) for k in names}
    fast = min(med, key=med.get)
    return {"p": p, "winner": fast if p < alpha else None, "strata": used,
            "median_ratio": max(med.values()) / med[fast]}
