"""A data-set mix: the expanded epoch (which sample ids an epoch serves, each repeat counted).

A mix turns the data sets' sizes into an epoch list of length ``size``: entry ``j`` is a global
sample id, ids of small data sets repeated (oversampled) or ids of large ones left out
(undersampled) as the sampling rule says. The sampler then shuffles and deals that list exactly
as it deals a single data set (:mod:`..schedule`), so determinism from ``(seed, epoch)``,
exactly-once over the expanded epoch, resume and byte-identical backends carry over unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.blocks import inclusive_bounds
from ..schedule import epoch_permutation


@dataclass(frozen=True)
class DataSets:
    """Names and sizes of the data sets of a store, in global id order."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    weights: tuple[float | None, ...] = ()

    @property
    def starts(self) -> np.ndarray:
        return inclusive_bounds(self.sizes)

    @classmethod
    def of_store(cls, store) -> "DataSets":
        """From a store's meta (several files) or one data set of the store's size."""
        meta = store.meta
        if "dataset_starts" in meta:
            starts = np.asarray(meta["dataset_starts"], dtype=np.int64)
            return cls(tuple(meta["dataset_names"]), tuple(np.diff(starts).tolist()),
                       tuple(meta.get("dataset_weights") or ()))
        name = str(meta.get("attributes", {}).get("dataset_name", "data"))
        return cls((name,), (store.num_samples,))


class Mix:
    """Base: the epoch list is a fixed expansion, shuffled with ``seed + epoch``.

    Subclasses set ``counts`` (entries of each data set in the epoch). Data set ``d``'s entries
    are ``start_d + (j mod n_d)`` for ``j < counts[d]``: the whole set repeated, then its head,
    the index arithmetic of fairchem's ``ConcatDataset`` (``sample_idx % real_size``)."""

    name = "base"
    world_size: int | None = None  # a mix that depends on the number of ranks sets it

    def __init__(self, sets: DataSets, counts):
        self.sets = sets
        self.counts = np.asarray(counts, dtype=np.int64)
        if self.counts.sum() <= 0:
            raise ValueError(f"sampling {self.name!r} gives an empty epoch (entries per data set "
                             f"{self.counts.tolist()}); raise the ratios")

    @property
    def arithmetic(self) -> bool:
        """Whether entry ``e`` of data set ``d`` is ``start_d + (e - first_d) mod n_d`` (this
        base class's expansion): the sampler then maps positions to ids without the list
        (:class:`~mdloader_plugin.sampling.order.ExpandedOrder`)."""
        return type(self).expanded is Mix.expanded and type(self).order is Mix.order

    def within(self, order: str):
        """Per-data-set orders that make this mix's epoch evaluable under `order` without its
        list (:class:`~mdloader_plugin.sampling.order.ExpandedOrder`'s ``inner``), or None."""
        return None

    @property
    def size(self) -> int:
        """Entries in an epoch (each repeat counted)."""
        return int(self.counts.sum())

    def expanded(self) -> np.ndarray:
        """The unshuffled epoch list: data set by data set."""
        starts, sizes = self.sets.starts, self.sets.sizes
        return np.concatenate([starts[d] + np.arange(c, dtype=np.int64) % max(sizes[d], 1)
                               for d, c in enumerate(self.counts)])

    def order(self, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
        """The epoch list in this epoch's order (DistributedSampler's permutation of positions)."""
        return self.expanded()[epoch_permutation(self.size, seed, epoch, shuffle)]

    def describe(self) -> str:
        return ", ".join(f"{n}: {c} of {s}" for n, c, s in
                         zip(self.sets.names, self.counts.tolist(), self.sets.sizes))
