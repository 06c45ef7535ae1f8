"""Deterministic global sampling: which sample ids every rank needs at every step.

The order is the one ``torch.utils.data.DistributedSampler`` gives for the same
``(num_samples, world_size, seed, epoch, shuffle, drop_last)``: a ``torch.randperm`` seeded with
``seed + epoch``, padded by repeating its head (or truncated with ``drop_last``) to a multiple of
the world size, and dealt round-robin (rank ``r`` takes positions ``r, r + P, r + 2P, ...``).
Each rank's share is then cut into batches of ``batch_size`` (the last one may be short; every
rank gets the same number of steps and the same batch sizes).

Because the plan is a pure function of ``(seed, epoch, step)``, every rank knows what every other
rank needs: the collective backend needs no request round, and any step can be replayed for a
resume or for checking that two backends agree byte for byte. Resume state is just
``SamplerState(seed, epoch, step)``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class SamplerState:
    """Where an iteration stands: the next step to serve is ``step`` of ``epoch``."""

    seed: int
    epoch: int
    step: int

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "SamplerState":
        try:
            return cls(int(d["seed"]), int(d["epoch"]), int(d["step"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"loader state must have integer seed, epoch, step; got {d!r}") from exc


def epoch_permutation(num_samples: int, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
    """The global order of one epoch, identical to DistributedSampler's."""
    if not shuffle:
        return np.arange(num_samples, dtype=np.int64)
    import torch  # the generator must be torch's to match DistributedSampler bit for bit

    g = torch.Generator()
    g.manual_seed(seed + epoch)
    return torch.randperm(num_samples, generator=g).numpy().astype(np.int64, copy=False)


class GlobalSampler:
    """Plans of all ranks for every step of every epoch.

    Args:
        num_samples: size of the data set (global).
        world_size: number of ranks taking batches.
        batch_size: samples per rank per step.
        shuffle: shuffle each epoch (``seed + epoch``) or keep file order.
        seed: base seed, the same on every rank.
        drop_last: drop the tail that does not divide evenly among ranks (else pad by repeating
            the head of the order, as DistributedSampler does).
    """

    def __init__(self, num_samples: int, world_size: int, batch_size: int, *,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        if num_samples <= 0:
            raise ValueError(f"the data set is empty (num_samples={num_samples})")
        if world_size <= 0:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if drop_last and num_samples < world_size:
            raise ValueError(f"drop_last with {num_samples} samples on {world_size} ranks leaves "
                             "no sample for some ranks; use fewer ranks or drop_last=False")
        self.num_samples = num_samples
        self.world_size = world_size
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        if drop_last:
            self.per_rank = num_samples // world_size
        else:
            self.per_rank = -(-num_samples // world_size)
        self._cache: tuple[int, np.ndarray] | None = None

    @property
    def total_size(self) -> int:
        return self.per_rank * self.world_size

    @property
    def steps_per_epoch(self) -> int:
        return -(-self.per_rank // self.batch_size)

    def batch_len(self, step: int) -> int:
        return min(self.batch_size, self.per_rank - step * self.batch_size)

    def epoch_table(self, epoch: int) -> np.ndarray:
        """``[world_size, per_rank]`` sample ids: row ``r`` is rank ``r``'s order this epoch."""
        if self._cache is not None and self._cache[0] == epoch:
            return self._cache[1]
        order = epoch_permutation(self.num_samples, self.seed, epoch, self.shuffle)
        total = self.total_size
        if total > order.size:
            reps = -(-(total - order.size) // order.size)
            order = np.concatenate([order, np.tile(order, reps)[: total - order.size]])
        else:
            order = order[:total]
        table = np.ascontiguousarray(order.reshape(self.per_rank, self.world_size).T)
        self._cache = (epoch, table)
        return table

    def plan(self, epoch: int, step: int) -> np.ndarray:
        """``[world_size, b]`` ids every rank takes at `step` of `epoch` (b = this step's size)."""
        if not 0 <= step < self.steps_per_epoch:
            raise IndexError(f"step {step} outside 0..{self.steps_per_epoch - 1}")
        lo = step * self.batch_size
        return self.epoch_table(epoch)[:, lo:lo + self.batch_size]

    def rank_indices(self, epoch: int, rank: int) -> np.ndarray:
        """All ids rank `rank` takes in `epoch`, in order (DistributedSampler's ``__iter__``)."""
        return self.epoch_table(epoch)[rank]
