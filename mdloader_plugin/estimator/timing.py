"""Timing calibration points under a time budget (``calibrate.py``'s clock).

A calibration must end in about a minute at any link rate (an earlier version took 310 s at
100mbit). :class:`CalibrationSetup` holds the sizes, repetitions and the run's time budget,
split over the stages by :data:`SHARES`, and a stage that overran leaves the later ones less
(:func:`stage_scale`: each stage gets its share of what is left of the budget, never more than
its share of the whole); :func:`median_time` runs as many repetitions of a point as its share
allows; :class:`StageClock` adds up each point's wall time, maxed over ranks, so that every rank
takes the same decision to skip the rest of a series (a collective must be entered by all).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

#: share of CalibrationSetup.budget_s per stage
SHARES = {"memcpy": 0.06, "plan": 0.02, "dtype": 0.02, "get": 0.45, "alltoallv": 0.35,
          "backends": 0.10}


@dataclass
class CalibrationSetup:
    """Sizes, repetitions and the time budget of a calibration run."""

    reps: int = 15
    sizes: tuple[int, ...] = (256, 4096, 65536)
    blocks: tuple[int, ...] = (1, 16)
    # up to 4 MiB a pair: the per-byte cost is the slope between the two largest (calibrate's
    # _a2a_slopes), which must be past what a link's buffers absorb (a multi-MB step's regime)
    a2a_sizes: tuple[int, ...] = (0, 4096, 131072, 1 << 20, 4 << 20)
    steps: int = 12
    budget_s: float = 45.0  # whole run, split by SHARES (see the module docstring)
    max_step_s: float = 0.25  # a series' messages stop growing past a step this long
    scale: float = 1.0  # of every stage's share (``stage_scale``: what earlier stages left)

    @classmethod
    def quick(cls) -> "CalibrationSetup":
        return cls(reps=5, sizes=(1024, 32768), blocks=(1, 8), a2a_sizes=(0, 4096, 65536, 1 << 19),
                   steps=5, budget_s=20.0, max_step_s=0.1)

    def point_budget(self, stage: str, points: int) -> float:
        """Seconds one measured point of `stage` may take."""
        return self.budget_s * SHARES[stage] * self.scale / max(points, 1)

    def clock(self, stage: str, comm) -> "StageClock":
        return StageClock(comm, self.budget_s * SHARES[stage] * self.scale)

    def for_stage(self, stage: str, spent_s: float) -> "CalibrationSetup":
        """This setup with `stage`'s share scaled to what the earlier stages left
        (:func:`stage_scale`); `spent_s` must be identical on every rank."""
        return replace(self, scale=stage_scale(stage, spent_s, self.budget_s))


def stage_scale(stage: str, spent_s: float, budget_s: float) -> float:
    """The factor on `stage`'s share once `spent_s` of `budget_s` is gone: `stage` and the stages
    after it (in :data:`SHARES` order) split what is left in proportion to their shares, never
    getting more than their share of the whole (1.0) and nothing once it is spent (0.0: only the
    points a fit cannot do without run, at 2 repetitions). Measured before this: a slow link's
    Get stage overran its share and the later stages still took theirs (2 hosts x 3 ranks at
    100mbit: 73-112 s against a 45 s budget)."""
    names = list(SHARES)
    later = sum(SHARES[n] for n in names[names.index(stage):])
    left = max(0.0, budget_s - spent_s)
    return min(1.0, left / (budget_s * later)) if budget_s > 0 and later > 0 else 0.0


class StageClock:
    """Seconds a stage has spent, identical on every rank (each point's wall time is maxed over
    ranks), so every rank takes the same decision to skip the rest of a series."""

    def __init__(self, comm, limit: float):
        self.comm, self.limit, self.spent = comm, limit, 0.0

    def point(self, fn: Callable[[], float]) -> float:
        """Run one measured point (`fn` returns its time on this rank); its max over ranks."""
        t0 = time.perf_counter()
        t = fn()
        t, wall = max_array(self.comm, np.array([t, time.perf_counter() - t0]))
        self.spent += float(wall)
        return float(t)

    @property
    def over(self) -> bool:
        return self.spent > self.limit


def median_time(fn: Callable[[], None], reps: int, comm=None,
                 budget: float | None = None) -> float:
    """Median of `reps` timed calls after a warm-up; with a `budget` (seconds for this point),
    as many as fit in it (at least 2), agreed over `comm` (the warm-up's max) so that every
    rank calls `fn` equally often (needed when `fn` is a collective)."""
    t = time.perf_counter()
    fn()  # warm-up
    if budget is not None:
        warm = time.perf_counter() - t
        if comm is not None:
            warm = max_over(comm, warm)
        reps = max(2, min(reps, int(budget / max(warm, 1e-9))))
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def max_over(comm, value: float) -> float:
    """`value`'s maximum over the ranks of `comm` (a collective)."""
    from mpi4py import MPI

    return float(comm.allreduce(value, op=MPI.MAX))


def max_array(comm, values: np.ndarray) -> np.ndarray:
    """Element-wise max over ranks (one collective for a whole series)."""
    from mpi4py import MPI

    out = np.empty_like(np.asarray(values, dtype=np.float64))
    comm.Allreduce(np.asarray(values, dtype=np.float64), out, op=MPI.MAX)
    return out


__all__ = ["SHARES", "CalibrationSetup", "StageClock", "max_array", "max_over",
           "median_time", "stage_scale"]
