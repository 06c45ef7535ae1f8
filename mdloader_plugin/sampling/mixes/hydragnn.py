"""``hydragnn``: the data-set split of HydraGNN's multibranch example (``--multi``), with its
``--num_samples`` and ``--oversampling [--oversampling_num_samples K]`` options.

HydraGNN 5.0's ``examples/multibranch/train.py`` gives data set ``d`` a group of
``ceil(n_d / N * P)`` of the ``P`` ranks (float32 arithmetic; the largest group gives back the
excess), splits the data set into contiguous chunks among its group (``nsplit``: the first
``n mod g`` chunks one longer) and, with ``num_samples``, keeps only the first ``num_samples`` of
each chunk (when the chunk is that long). Then:

* without ``oversampling`` (its ``--ddstore`` path): the kept chunks together are one data set
  that a ``DistributedSampler`` shuffles and deals over all ranks; here they are the epoch list,
  shuffled and dealt the same way;
* with ``oversampling``: every rank draws ``K`` samples from its own chunk with torch's
  ``RandomSampler(replacement=False, num_samples=K)`` (whole permutations of the chunk, then the
  head of one more), ``K`` = ``oversampling_num_samples`` or the longest chunk. So every rank
  takes the same number of samples, all from one data set, and small data sets are repeated.
  HydraGNN draws with an unseeded generator; here each epoch's draws come from ``seed + epoch``
  (every rank's row in rank order), so the epoch is reproducible and resumable (on the same
  number of ranks: the split depends on it).
"""

from __future__ import annotations

import numpy as np

from ...core.errors import internal
from .base import DataSets, Mix


def process_counts(sizes, world_size: int) -> list[int]:
    """Ranks of each data set's group (the multibranch example's float32 arithmetic)."""
    n = np.array(sizes, dtype=np.float32)
    counts = np.ceil(n / sum(n) * world_size).astype(np.int32)
    big = int(np.argmax(counts))
    counts[big] -= int(np.sum(counts)) - world_size
    if (counts <= 0).any():
        raise ValueError(f"sampling hydragnn gives every data set its own ranks: {len(sizes)} "
                         f"data sets of sizes {list(sizes)} need more than {world_size} ranks")
    return counts.tolist()


def chunk_bounds(n: int, parts: int) -> list[tuple[int, int]]:
    """HydraGNN's ``nsplit`` of ``range(n)`` into `parts` contiguous chunks."""
    k, m = divmod(n, parts)
    return [(i * k + min(i, m), (i + 1) * k + min(i + 1, m)) for i in range(parts)]


def rank_chunks(sets: DataSets, world_size: int, num_samples: int | None):
    """``[(data set, global lo, global hi)]`` of every rank, in rank order."""
    out = []
    for d, g in enumerate(process_counts(sets.sizes, world_size)):
        for lo, hi in chunk_bounds(sets.sizes[d], g):
            if num_samples is not None and num_samples <= hi - lo:
                hi = lo + num_samples
            out.append((d, int(sets.starts[d]) + lo, int(sets.starts[d]) + hi))
    return out


class HydraGNNMix(Mix):
    """HydraGNN's multibranch split on `world_size` ranks (see the module docstring)."""

    name = "hydragnn"

    def __init__(self, sets: DataSets, spec: dict, world_size: int):
        unknown = sorted(set(spec) - {"type", "num_samples", "oversampling",
                                      "oversampling_num_samples"})
        if unknown:
            raise ValueError(f"sampling hydragnn: unknown option {unknown[0]!r} (options: "
                             "num_samples, oversampling, oversampling_num_samples)")
        self.world_size = world_size
        self.chunks = rank_chunks(sets, world_size, _positive(spec, "num_samples"))
        if any(hi <= lo for _, lo, hi in self.chunks):
            raise ValueError(f"sampling hydragnn: some ranks get no sample (data set sizes "
                             f"{list(sets.sizes)} on {world_size} ranks); use fewer ranks")
        self.oversampling = bool(spec.get("oversampling", False))
        lens = [hi - lo for _, lo, hi in self.chunks]
        self.k = _positive(spec, "oversampling_num_samples") or max(lens)
        per = self.k if self.oversampling else None
        counts = np.zeros(len(sets.sizes), dtype=np.int64)
        for (d, lo, hi) in self.chunks:
            counts[d] += per if per is not None else hi - lo
        super().__init__(sets, counts)

    def expanded(self) -> np.ndarray:
        if self.oversampling:
            raise internal("an oversampling epoch has no fixed list")
        return np.concatenate([np.arange(lo, hi, dtype=np.int64) for _, lo, hi in self.chunks])

    def order(self, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
        if not self.oversampling:
            return super().order(seed, epoch, shuffle)
        import torch

        g = torch.Generator()
        g.manual_seed(seed + epoch)
        rows = [_draw(lo, hi, self.k, g if shuffle else None) for _, lo, hi in self.chunks]
        return np.ascontiguousarray(np.stack(rows).T).reshape(-1)  # dealt back row by row


def _draw(lo: int, hi: int, k: int, g) -> np.ndarray:
    """``RandomSampler(replacement=False, num_samples=k)`` over ids ``lo..hi-1``."""
    import torch

    n = hi - lo
    perms = [(torch.randperm(n, generator=g).numpy() if g is not None else np.arange(n))
             for _ in range(-(-k // n))]
    return lo + np.concatenate(perms)[:k].astype(np.int64)


def _positive(spec: dict, key: str) -> int | None:
    v = spec.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
        raise ValueError(f"sampling hydragnn: {key} must be a positive integer, got {v!r}")
    return int(v)
