"""``weights``: each data set's share of an epoch given as a probability (the optional ``weight``
of each file in a multi-file config). The epoch keeps the total size ``N`` of all data sets and
data set ``d`` fills ``int(w_d * N)`` entries of it (repeating a small set, taking the head of a
large one, as fairchem's expansion does). Weights must be >= 0 and sum to 1."""

from __future__ import annotations

import numpy as np

from .base import DataSets, Mix


def checked_weights(given, names) -> list[float]:
    """One weight a data set, each >= 0, summing to 1 (ValueError naming the bad one)."""
    if given is None or len(given) != len(names) or any(w is None for w in given):
        raise ValueError(f"sampling weights needs one weight a data set ({', '.join(names)}), "
                         f"got {given!r}")
    out = []
    for w, n in zip(given, names):
        try:
            w = float(w)
        except (TypeError, ValueError):
            w = float("nan")
        if not (np.isfinite(w) and w >= 0):
            raise ValueError(f"weight of data set {n!r} must be a number >= 0, got {w!r}")
        out.append(w)
    if abs(sum(out) - 1.0) > 1e-6:
        raise ValueError(f"data set weights must sum to 1, they sum to {sum(out):.6g} "
                         f"({dict(zip(names, out))}); rescale them")
    return out


class Weights(Mix):
    """``int(w_d * N)`` entries of data set ``d`` in an epoch of ``N`` (the sizes' sum)."""

    name = "weights"

    def __init__(self, sets: DataSets, spec: dict, world_size: int):
        given = spec.get("weights")
        if given is None:
            given = list(sets.weights) or None
        if isinstance(given, dict):
            given = [given.get(n) for n in sets.names]
        self.weights = checked_weights(given, sets.names)
        total = sum(sets.sizes)
        super().__init__(sets, [int(w * total) for w in self.weights])
