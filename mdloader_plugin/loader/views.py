"""What trainers read beside the batches: ``loader.sampler`` (``set_epoch``, ``len``) and
``loader.dataset`` (this rank's own samples)."""

from __future__ import annotations

from typing import Sequence

from ..records import codec


class EpochSampler:
    """What trainers expect at ``loader.sampler``: ``set_epoch`` (and ``len``)."""

    def __init__(self, loader: "MDLoader"):
        self._loader = loader

    def set_epoch(self, epoch: int) -> None:
        self._loader.set_epoch(epoch)

    def __len__(self) -> int:
        return self._loader.sampler_core.per_rank


class LocalSamples(Sequence):
    """``loader.dataset``: this rank's own samples (decoded copies), for code that peeks at one."""

    def __init__(self, loader: "MDLoader"):
        self._loader = loader

    def __len__(self) -> int:
        lo, hi = self._loader.store.local_range
        return hi - lo

    def __getitem__(self, i: int):
        lo, hi = self._loader.store.local_range
        if not -len(self) <= i < len(self):
            raise IndexError(f"local sample {i} out of range ({len(self)} on this rank)")
        rec = self._loader.store.local_record(lo + (i % len(self))).copy()
        return self._loader.to_sample(codec.decode(rec))
