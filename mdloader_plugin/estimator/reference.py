"""The code before per-rank step plans, kept as the reference ``mdloader rank-cost --legacy``
and the benchmarks compare with: every rank computes the whole world's ``[P, b]`` step
(:func:`~mdloader_plugin.sampling.reference.world_step`), takes its row and scans its group's
rows for its sends, and weights are balanced over the whole world (one balance window of ``P``
ranks, one block of all columns). Tests and benchmarks only: the loader never imports it.
"""

from __future__ import annotations

import time

from ..sampling.planner import StepPlan
from ..sampling.reference import kept_bytes, table_plan
from .rankcost import Job, RankCost


class LegacyRankCost(RankCost):
    """:class:`~.rankcost.RankCost` running the code before per-rank step plans."""

    def balance(self, job: Job) -> dict:
        return {"balance_window": job.ranks, "balance_columns": job.batch_size}

    def epoch_start(self, epoch: int) -> float:
        t = time.thread_time()
        self.schedule.epoch_order(epoch)
        return time.thread_time() - t

    def plan(self, epoch: int, step: int) -> StepPlan:
        return table_plan(self.schedule, epoch, step, self.rank, self.lo, self.hi, self.r0,
                          self.w)

    def state_bytes(self) -> int:
        """As :meth:`~.rankcost.RankCost.state_bytes`, plus the run of world steps kept."""
        return super().state_bytes() + kept_bytes(self.schedule)


__all__ = ["LegacyRankCost"]
