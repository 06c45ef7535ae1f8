"""Blocks of an id space and prefix sums: the one copy of each (numpy only).

A data set of ``N`` samples is cut into ``P`` contiguous blocks (rank ``r`` owns ids
``[b[r], b[r+1])``, sizes differing by at most one); records laid end to end start at the
exclusive prefix sum of their sizes. Store, budget, index, backends, sampler and check all use
these three functions.
"""

from __future__ import annotations

import numpy as np

__all__ = ["block_bounds", "owner_of", "exclusive_offsets", "inclusive_bounds"]


def block_bounds(num_samples: int, size: int) -> np.ndarray:
    """``size + 1`` block starts: rank ``r`` owns ``[b[r], b[r+1])`` (sizes differ by <= 1)."""
    r = np.arange(size + 1, dtype=np.int64)
    return (r * int(num_samples)) // int(size)


def owner_of(block_starts: np.ndarray, ids) -> np.ndarray:
    """The block (rank) holding each of `ids`, given the ``[P + 1]`` block starts."""
    return np.searchsorted(block_starts, ids, side="right") - 1


def exclusive_offsets(sizes) -> np.ndarray:
    """Start offsets of consecutive sizes laid end to end: ``[0, s0, s0+s1, ...]`` (int64, one
    a size)."""
    sizes = np.asarray(sizes)
    out = np.zeros(sizes.size, dtype=np.int64)
    if sizes.size > 1:
        np.cumsum(sizes[:-1], out=out[1:])
    return out


def inclusive_bounds(sizes) -> np.ndarray:
    """``[0, s0, s0+s1, ..., total]`` (int64, one more than `sizes`): the starts plus the end."""
    sizes = np.asarray(sizes, dtype=np.int64)
    out = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return out
