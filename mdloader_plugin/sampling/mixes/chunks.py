"""``chunks``: an epoch list given as explicit ranges of store ids, as upstream HydraGNN scripts
build it, with upstream's ``oversampling``.

Upstream's scale scripts (``examples/multibranch/train.py`` and its kin) give every rank a
contiguous subset of one file (``setsubset``) and wrap the subsets in DDStore's
``DistDataset(..., local=True)``: the data set the samplers see is the ranks' subsets joined in
rank order. ``chunks`` is that list: ``spec["chunks"]`` holds ``[lo, hi)`` ranges of store ids
(each rank's subset, in rank order), and the epoch list is their concatenation, shuffled and dealt
as one data set (``DistributedSampler``'s permutation of its positions). Whatever split a script
computes (``nsplit``, ``--num_samples``, ``--task_parallel``'s trimming) is what it serves.

With ``oversampling: K`` (upstream's ``create_dataloaders(oversampling=True, num_samples=...)``:
``RandomSampler(dataset, replacement=False, num_samples=K)`` on every rank) each rank draws ``K``
entries of the whole list: whole permutations of it, then the head of one more. Upstream draws
from torch's global generator (after the scripts' ``torch.manual_seed(0)``, the same draws on
every rank); here rank ``r`` draws from ``seed + epoch`` and its rank, so ranks take different
samples and an epoch is reproducible (on the same number of ranks).
"""

from __future__ import annotations

import numpy as np

from .base import DataSets, Mix


class ChunksMix(Mix):
    """The concatenated ranges of ``spec["chunks"]`` (see the module docstring)."""

    name = "chunks"

    def __init__(self, sets: DataSets, spec: dict, world_size: int):
        unknown = sorted(set(spec) - {"type", "chunks", "oversampling"})
        if unknown:
            raise ValueError(f"sampling chunks: unknown option {unknown[0]!r} (options: chunks, "
                             "oversampling)")
        self.chunks = [(int(lo), int(hi)) for lo, hi in spec.get("chunks") or []]
        total = int(sets.starts[-1])
        bad = [(lo, hi) for lo, hi in self.chunks if not 0 <= lo <= hi <= total]
        if bad:
            raise ValueError(f"sampling chunks: range {list(bad[0])} outside the store's "
                             f"{total} samples")
        self.k = spec.get("oversampling")
        if self.k is not None:
            if isinstance(self.k, bool) or int(self.k) <= 0:
                raise ValueError(f"sampling chunks: oversampling must be a positive number of "
                                 f"samples a rank, got {self.k!r}")
            self.k, self.world_size = int(self.k), world_size
        ids = self._listed()
        counts = np.bincount(np.searchsorted(sets.starts, ids, side="right") - 1,
                             minlength=len(sets.sizes)) if ids.size else np.zeros(
                                 len(sets.sizes), dtype=np.int64)
        if self.k is not None and ids.size:  # expected entries of each data set, P K in all
            counts = _scaled(counts, self.k * world_size)
        super().__init__(sets, counts)

    def _listed(self) -> np.ndarray:
        if not self.chunks:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([np.arange(lo, hi, dtype=np.int64) for lo, hi in self.chunks])

    def expanded(self) -> np.ndarray:
        return self._listed()

    def order(self, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
        if self.k is None:
            return super().order(seed, epoch, shuffle)
        import torch

        ids = self._listed()
        rows = []
        for rank in range(self.world_size):
            g = torch.Generator()
            g.manual_seed((seed + epoch) * 1_000_003 + rank)
            n = ids.size
            perms = [torch.randperm(n, generator=g).numpy() if shuffle else np.arange(n)
                     for _ in range(-(-self.k // n))]
            rows.append(ids[np.concatenate(perms)[:self.k]])
        return np.ascontiguousarray(np.stack(rows).T).reshape(-1)  # dealt back row by row


def _scaled(counts: np.ndarray, total: int) -> np.ndarray:
    """`counts` scaled to sum to `total` (largest remainders)."""
    exact = counts / counts.sum() * total
    out = np.floor(exact).astype(np.int64)
    out[np.argsort(-(exact - out))[:total - int(out.sum())]] += 1
    return out
