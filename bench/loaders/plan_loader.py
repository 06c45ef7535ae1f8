"""The base of the benchmark's baseline loaders: serve ``plan[rank]`` of the shared global
sampler (``baselines.py``, ``ddstore_real.py``)."""

from __future__ import annotations

import numpy as np


class PlanLoader:
    """Base: a loader that serves ``plan[rank]`` of the shared global sampler."""

    name = "base"

    def __init__(self, sampler, rank: int):
        self.sampler, self.rank = sampler, rank

    def ids(self, epoch: int, step: int) -> np.ndarray:
        return self.sampler.plan(epoch, step)[self.rank]

    def step(self, epoch: int, step: int):
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (collective where the loader holds MPI objects)."""
