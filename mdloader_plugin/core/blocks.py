"""Contiguous blocks of sample ids and records: one copy of each piece of prefix-sum arithmetic.

Rank ``r`` of ``P`` owns sample ids ``[starts[r], starts[r + 1])`` (:func:`block_bounds`); a
rank's records lie end to end in its buffer (:func:`exclusive_offsets`). numpy only.
"""

from __future__ import annotations

import numpy as np

__all__ = ["block_bounds", "exclusive_offsets"]


def block_bounds(num_samples: int, size: int) -> np.ndarray:
    """``size + 1`` block starts: rank ``r`` owns ``[b[r], b[r+1])`` (sizes differ by <= 1)."""
    r = np.arange(size + 1, dtype=np.int64)
    return (r * num_samples) // size


def exclusive_offsets(sizes: np.ndarray) -> np.ndarray:
    """Start offsets of records of the given sizes laid end to end: ``[0, s0, s0+s1, ...]``."""
    offs = np.zeros(sizes.size, dtype=np.int64)
    if sizes.size > 1:
        np.cumsum(sizes[:-1], out=offs[1:])
    return offs
