"""The whole world's step: what every rank takes at a step, ``[P, b]`` ids at once.

The loader never computes it: a rank's own row and sends come from its
:class:`~.planner.RankPlanner` at ``O(b)`` a step. The whole-world step costs ``O(P b)`` a rank
a step (20-39 ms at P = 8,192); it is the reference the per-rank step plans are tested against
(tests/unit/sampling/test_plan.py), what the code before per-rank plans ran (the ``legacy`` rows
of ``mdloader rank-cost``), and what small tools and benchmarks print. Tests and benchmarks only:
nothing on the loader's path imports this module (tests/unit/test_package_layout.py checks).

:func:`world_step` is the function; :class:`ReferenceSchedule` is a
:class:`~.schedule.Schedule` with it as the method ``plan(epoch, step)`` (the old
``GlobalSampler``).
"""

from __future__ import annotations

import weakref

import numpy as np

from .balance import deal_blocks
from .planner import StepPlan, StepRun
from .schedule import Schedule

PLAN_POSITIONS = 1 << 14  # the world's steps are computed in runs of about this many ids

_RUNS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # schedule -> [run, dealt]


def world_step(schedule: Schedule, epoch: int, step: int) -> np.ndarray:
    """``[world_size, b]`` ids every rank takes at `step` of `epoch` (b = this step's size).

    Computed in runs of steps (~:data:`PLAN_POSITIONS` ids) kept with the schedule until a step
    outside; with weights, each step dealt once (:mod:`.balance`)."""
    sch = schedule
    if not 0 <= step < sch.steps_in(epoch):
        raise IndexError(f"step {step} outside 0..{sch.steps_in(epoch) - 1}")
    kept = _RUNS.setdefault(sch, [None, None])
    run: StepRun = sch.step_run(kept[0], epoch, step, PLAN_POSITIONS)
    kept[0] = run
    table = run.columns(step, sch.batch_size, sch.batch_len(step, epoch))
    if sch.weights is None:
        return table
    key = (epoch, sch.offset_of(epoch), step)  # a rank's row and sends deal it once
    if kept[1] is None or kept[1][0] != key:
        dealt = deal_blocks(table, sch.weights, sch.balance_window, sch.balance_columns)
        dealt.flags.writeable = False  # shared by the calls of a step
        kept[1] = (key, dealt)
    return kept[1][1]


def kept_bytes(schedule: Schedule) -> int:
    """Bytes of the run of world steps :func:`world_step` keeps for `schedule`."""
    run = _RUNS.get(schedule, [None])[0]
    return 0 if run is None else int(run.ids.nbytes)


def table_plan(schedule: Schedule, epoch: int, step: int, rank: int, lo: int, hi: int,
               group_first: int = 0, group_size: int | None = None) -> StepPlan:
    """Rank `rank`'s step plan the way it was made before per-rank plans: the whole world's
    step, its group's rows scanned for the sends (``O(W b)``)."""
    w = schedule.world_size if group_size is None else group_size
    table = world_step(schedule, epoch, step)[group_first:group_first + w]
    plan = StepPlan.from_table(table, rank - group_first, lo, hi)
    plan.epoch, plan.step = epoch, step
    return plan


class ReferenceSchedule(Schedule):
    """A :class:`~.schedule.Schedule` with the whole world's step as ``plan(epoch, step)``."""

    def plan(self, epoch: int, step: int) -> np.ndarray:
        """:func:`world_step` of this schedule."""
        return world_step(self, epoch, step)

    @property
    def order_bytes(self) -> int:
        """The order's bytes and the run of world steps kept."""
        return super().order_bytes + kept_bytes(self)


__all__ = ["PLAN_POSITIONS", "ReferenceSchedule", "kept_bytes", "table_plan", "world_step"]
