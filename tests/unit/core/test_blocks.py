"""core/blocks: block bounds and exclusive prefix sums (the one copy of each)."""

import numpy as np
import pytest

from mdloader_plugin.core.blocks import block_bounds, exclusive_offsets


@pytest.mark.parametrize("n, size", [(10, 3), (3, 3), (0, 4), (1, 1), (7, 1), (1001, 4), (5, 8)])
def test_block_bounds_cover_every_id_once_and_differ_by_at_most_one(n, size):
    b = block_bounds(n, size)
    assert b.dtype == np.int64 and b.shape == (size + 1,)
    assert b[0] == 0 and b[-1] == n
    sizes = np.diff(b)
    assert (sizes >= 0).all() and sizes.max() - sizes.min() <= 1
    owners = np.repeat(np.arange(size), sizes)
    assert owners.size == n and (np.diff(owners) >= 0).all()  # contiguous, in rank order


def test_block_bounds_exact_values():
    assert block_bounds(10, 3).tolist() == [0, 3, 6, 10]
    assert block_bounds(4, 4).tolist() == [0, 1, 2, 3, 4]
    assert block_bounds(2, 4).tolist() == [0, 0, 1, 1, 2]


def test_block_bounds_large_counts_do_not_overflow():
    n = 10**12
    b = block_bounds(n, 8192)
    assert b[-1] == n and np.diff(b).min() == n // 8192


@pytest.mark.parametrize("sizes, want", [
    ([], []), ([5], [0]), ([3, 4, 5], [0, 3, 7]), ([0, 0, 2, 0], [0, 0, 0, 2]),
])
def test_exclusive_offsets(sizes, want):
    got = exclusive_offsets(np.asarray(sizes, dtype=np.int64))
    assert got.dtype == np.int64 and got.tolist() == want


def test_exclusive_offsets_lays_records_end_to_end():
    sizes = np.random.default_rng(0).integers(1, 1000, size=500)
    offs = exclusive_offsets(sizes)
    assert (offs[1:] == offs[:-1] + sizes[:-1]).all() and offs[-1] + sizes[-1] == sizes.sum()
