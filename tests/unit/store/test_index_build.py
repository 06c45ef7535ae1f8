"""store/index_build: every rank's sizes of its block -> the global index (one rank here; the
multi-rank Allgatherv is checked in tests/unit/store/test_shard.py's 3-rank runs)."""

from __future__ import annotations

import numpy as np
import pytest

from mdloader_plugin.core.blocks import block_bounds, exclusive_offsets
from mdloader_plugin.store.index import CompactIndex, FullIndex
from mdloader_plugin.store.index_build import allgather_blocks, build_index

SIZES = np.random.default_rng(3).integers(1, 40, size=300) * 8 + 64


@pytest.mark.parametrize("kind, every", [("full", None), ("compact", None), ("compact", 1),
                                         ("compact", 16)])
def test_one_rank_index_answers_every_id(kind, every):
    idx = build_index(None, SIZES, block_bounds(300, 1), kind, every=every)
    assert isinstance(idx, FullIndex if kind == "full" else CompactIndex)
    ids = np.arange(300)
    if kind == "full":
        nbytes, offs, owner = idx.nbytes[ids], idx.offsets[ids], idx.owner_of(ids)
    else:
        nbytes, offs, owner = idx.nbytes_of(ids), idx.offsets_of(ids), idx.owner_of(ids)
        if every is not None:
            assert idx.every == every
    assert np.array_equal(nbytes, SIZES)
    assert np.array_equal(offs, exclusive_offsets(SIZES))
    assert owner.tolist() == [0] * 300


def test_compact_codes_use_the_sizes_common_unit():
    idx = build_index(None, SIZES, block_bounds(300, 1), "compact")
    assert idx.unit == 8 and idx.base == SIZES.min() and idx.codes.dtype == np.uint8


def test_node_share_on_one_rank_is_a_private_copy():
    idx = build_index(None, SIZES, block_bounds(300, 1), "compact", "node")
    assert idx.memory_bytes()["index_shared_bytes"] == 0


def test_allgather_one_rank():
    local = np.arange(5)
    assert allgather_blocks(None, local, 5) is local
    with pytest.raises(AssertionError) as e:
        allgather_blocks(None, local, 6)
    assert str(e.value) == ("Internal error: one rank must hold every sample (please report this "
                            "as an MDLoader bug)")
