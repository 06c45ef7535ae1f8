"""fairchem's four sampling types, with the expansion arithmetic of its ``ConcatDataset``.

fairchem expands data set ``d`` of ``n_d`` samples by a ratio ``r_d`` to ``int(r_d * n_d)``
entries (index ``j`` -> sample ``j mod n_d``) and concatenates them in its data set order; its
sampler then shuffles the concatenation. The ratios:

* ``explicit``: ``ratios: {name: r}``, one per data set;
* ``balanced``: ``max(n) / n_d`` (every data set as large as the largest);
* ``temperature`` (``temperature: T >= 1``): ``p_d = (n_d / N)^(1/T)`` normalised, target size
  ``n_max / p_max``, ``r_d = target * p_d / n_d`` (the largest keeps ratio 1);
* ``weighted``: ``ratios: [r_0, r_1, ...]`` as given, in data set order.

fairchem's ``create_dataset`` also permutes each data set once (``randperm(n)`` from a generator
seeded with the split's ``seed``: 0 for train, 1 otherwise, unless ``no_shuffle``), so the head a
partial repeat takes is a seeded random subset. ``dataset_seed: S`` (an MDLoader key) applies the
same permutation: entry ``j`` of data set ``d`` is then its sample ``randperm(n_d)[j mod n_d]``;
``no_shuffle: [name, ...]`` (fairchem's per-split ``no_shuffle``) keeps those data sets in file
order.

The tests compare :func:`ratios` with ``ConcatDataset._dataset_sampling`` of the installed
fairchem-core for all four. fairchem orders data sets by name (``create_concat_dataset`` sorts
them); MDLoader keeps the order the files are listed in, so list them sorted to get fairchem's
exact epoch order (the fairchem front end does).
"""

from __future__ import annotations

import numpy as np

from .base import DataSets, Mix

TYPES = ("explicit", "balanced", "temperature", "weighted")


def ratios(kind: str, sizes, names, spec: dict) -> list[float]:
    """Expansion ratio of every data set for sampling `kind` (fairchem's arithmetic)."""
    sizes = [int(s) for s in sizes]
    if kind == "explicit":
        given = spec.get("ratios")
        if not isinstance(given, dict):
            raise ValueError("sampling explicit needs ratios: {name: ratio, ...}")
        missing = [n for n in names if n not in given]
        if missing:
            raise ValueError(f"sampling explicit: no ratio for data set {missing[0]!r} "
                             f"(data sets: {', '.join(names)})")
        return [_ratio(given[n], n) for n in names]
    if kind == "balanced":
        return [max(sizes) / n for n in sizes]
    if kind == "temperature":
        return _temperature(sizes, spec.get("temperature"))
    if kind == "weighted":
        given = spec.get("ratios")
        if not isinstance(given, (list, tuple)) or len(given) != len(sizes):
            raise ValueError(f"sampling weighted needs ratios: a list of {len(sizes)} numbers, "
                             f"one a data set ({', '.join(names)}), got {given!r}")
        return [_ratio(r, n) for r, n in zip(given, names)]
    raise ValueError(f"sampling type {kind!r} is unknown; choose one of "
                     f"{', '.join(TYPES)}")


def _ratio(value, name: str) -> float:
    try:
        r = float(value)
    except (TypeError, ValueError):
        r = float("nan")
    if not r >= 0 or not np.isfinite(r):
        raise ValueError(f"sampling ratio of data set {name!r} must be a number >= 0, "
                         f"got {value!r}")
    return r


def _temperature(sizes: list[int], t) -> list[float]:
    try:
        t = float(t)
    except (TypeError, ValueError):
        raise ValueError(f"sampling temperature needs temperature: T >= 1, got {t!r}") from None
    if not t >= 1.0:
        raise ValueError(f"sampling temperature must be >= 1, got {t} (for custom weights use "
                         "type weighted)")
    total = sum(sizes)
    p = [(n / total) ** (1.0 / t) for n in sizes]
    p = [x / sum(p) for x in p]
    big = int(np.argmax(sizes))
    target = sizes[big] / p[big]
    return ((target * np.array(p)) / np.array(sizes)).tolist()


class FairchemMix(Mix):
    """One of fairchem's types: ``counts[d] = int(ratio_d * n_d)``."""

    def __init__(self, sets: DataSets, spec: dict, world_size: int):
        self.name = spec["type"]
        self.ratios = ratios(spec["type"], sets.sizes, sets.names, spec)
        self.dataset_seed = spec.get("dataset_seed")
        if self.dataset_seed is not None and (isinstance(self.dataset_seed, bool) or
                                              not isinstance(self.dataset_seed, int)):
            raise ValueError(f"sampling dataset_seed must be an integer, got "
                             f"{self.dataset_seed!r}")
        self.no_shuffle = spec.get("no_shuffle") or []
        if not isinstance(self.no_shuffle, (list, tuple)) or \
                any(n not in sets.names for n in self.no_shuffle):
            raise ValueError(f"sampling no_shuffle must list data set names (of "
                             f"{', '.join(sets.names)}), got {self.no_shuffle!r}")
        super().__init__(sets, [int(r * n) for r, n in zip(self.ratios, sets.sizes)])

    @property
    def arithmetic(self) -> bool:
        return self.dataset_seed is None  # else every data set has its own fixed permutation

    def within(self, order: str):
        """Under the ``feistel`` order, each data set's fixed permutation is a keyed Feistel
        bijection of its ``n_d`` (``dataset_seed``; the identity for ``no_shuffle``) in place of
        ``randperm(n_d)``: the epoch is then evaluated position by position, no list of entries.
        Same properties (each data set's share, every sample ``floor`` or ``ceil`` of its ratio
        times, the partial repeat a seeded random subset), another subset than fairchem's."""
        if order != "feistel" or self.dataset_seed is None:
            return None
        from ..order import FeistelOrder, IdentityOrder

        return [FeistelOrder(n, self.dataset_seed, 0) if n > 1 and name not in self.no_shuffle
                else IdentityOrder(n) for name, n in zip(self.sets.names, self.sets.sizes)]

    def expanded(self) -> np.ndarray:
        if self.dataset_seed is None:
            return super().expanded()
        import torch

        out = []
        for name, start, n, c in zip(self.sets.names, self.sets.starts, self.sets.sizes,
                                     self.counts):
            g = torch.Generator()
            g.manual_seed(self.dataset_seed)  # a fresh generator a data set, as create_dataset
            perm = torch.randperm(n, generator=g).numpy() if n > 1 and name not in \
                self.no_shuffle else np.arange(n, dtype=np.int64)
            out.append(start + perm[np.arange(c) % max(n, 1)].astype(np.int64))
        return np.concatenate(out)
