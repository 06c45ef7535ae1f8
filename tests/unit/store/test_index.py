"""Compact global index: the full index's offsets, lengths and owners exactly, in fewer bytes."""

import json

import numpy as np
import pytest

from mdloader_plugin.store.index import (CompactIndex, FullIndex, check_choice, code_dtype,
                                         code_params, encode)
from mdloader_plugin.store.index_build import build_index
from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.core.blocks import block_bounds, exclusive_offsets
from mdloader_plugin.store.shard import ShardStore
from mpirun import ROOT, mpirun


def reference(sizes, p):
    b = block_bounds(sizes.size, p)
    offs = np.concatenate([exclusive_offsets(sizes[b[r]:b[r + 1]]) for r in range(p)])
    return FullIndex(b, offs, sizes)


def compact(sizes, p, every):
    lo, g, hi = code_params(sizes)
    codes = encode(sizes, lo, g, code_dtype((hi - lo) // g))
    return CompactIndex(block_bounds(sizes.size, p), codes, lo, g, every)


SIZES = {  # record sizes of several spreads: one code byte, two, four; one size only; odd ones
    "tiny": lambda r, n: r.integers(4, 40, n) * 8,
    "molecules": lambda r, n: r.integers(50, 3000, n) * 8,
    "huge-spread": lambda r, n: r.integers(1, 2**20, n) * 8,
    "constant": lambda r, n: np.full(n, 96),
    "odd": lambda r, n: r.integers(1, 1000, n),
}


@pytest.mark.parametrize("kind", sorted(SIZES))
@pytest.mark.parametrize("n,p", [(1, 1), (2, 2), (63, 4), (64, 3), (65, 4), (1000, 7),
                                 (4097, 5)])
@pytest.mark.parametrize("every", [1, 3, 64])
def test_round_trip_equals_full_index(kind, n, p, every):
    sizes = np.asarray(SIZES[kind](np.random.default_rng(n * 31 + p), n), dtype=np.int64)
    ref, ci = reference(sizes, p), compact(sizes, p, every)
    ids = np.arange(n)
    assert np.array_equal(ci.offsets[ids], ref.offsets)
    assert np.array_equal(ci.nbytes[ids], sizes)
    assert np.array_equal(ci.owner_of(ids), ref.owner_of(ids))
    assert np.array_equal(np.asarray(ci.offsets), ref.offsets)  # materialised in chunks
    shuffled = np.random.default_rng(1).permutation(n)
    assert np.array_equal(ci.offsets[shuffled], ref.offsets[shuffled])
    assert ci.offsets[n - 1] == ref.offsets[n - 1] and ci.nbytes[-1] == sizes[-1]
    assert ci.nbytes.sum() == sizes.sum()
    assert np.mean(ci.nbytes) == pytest.approx(sizes.mean()) and np.std(ci.nbytes) == \
        pytest.approx(sizes.std())


def test_codes_are_the_narrowest_type():
    assert code_dtype(255) == np.uint8 and code_dtype(256) == np.uint16
    assert code_dtype(65535) == np.uint16 and code_dtype(65536) == np.uint32
    sizes = np.random.default_rng(0).integers(20, 3000, 10_000) * 8  # molecule-sized records
    ci = compact(sizes, 4, 64)
    assert ci.codes.dtype == np.uint16
    assert ci.memory_bytes()["index_bytes"] < 10_000 * (2 + 8 / 64) + 200  # vs 16 a sample


def test_build_index_on_one_rank_and_choices():
    sizes = np.arange(1, 101) * 8
    full = build_index(None, sizes, block_bounds(100, 1), "full")
    ci = build_index(None, sizes, block_bounds(100, 1), "compact", every=64)
    assert np.array_equal(ci.offsets[np.arange(100)], full.offsets)
    with pytest.raises(ConfigError, match="compact, full"):
        check_choice("dense", "rank")
    with pytest.raises(ConfigError, match="needs index='compact'"):
        check_choice("full", "node")


def test_store_memory_report_splits_index():
    samples = [{"x": np.zeros((i % 5 + 1, 2), np.float32)} for i in range(50)]
    st = ShardStore.from_samples(None, samples, 50)
    rep = st.memory_report()
    assert rep["index_bytes"] == st.index.codes.nbytes + st.index.chk.nbytes + 2 * 16
    assert rep["records_bytes"] == st.buffer.nbytes == rep["dataset_bytes"]
    full = ShardStore.from_samples(None, samples, 50, index="full")
    assert np.array_equal(full.buffer, st.buffer)
    assert full.memory_report()["index_bytes"] == 50 * 16 + 16


@pytest.mark.mpi
@pytest.mark.slow
def test_compact_and_shared_index_serve_identical_batches(tmp_path):
    """4 ranks: compact (dense, K=64), node-shared (one node, and the host split as 2 nodes)
    equal the full index entry for entry and both backends serve byte-identical batches."""
    out = tmp_path / "summary.json"
    r = mpirun(4, [ROOT / "tests" / "mpi_scripts" / "index_equal.py", "1000", out], timeout=400)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    per_rank = json.loads(out.read_text())
    for rep in per_rank:
        assert rep["compact-k64"]["index_bytes"] < rep["full"]["index_bytes"] / 2
        assert rep["shared-k64"]["index_bytes"] < rep["compact-k64"]["index_bytes"]
        assert rep["shared-2nodes"]["shared"] == rep["shared-k64"]["shared"] > 0


@pytest.mark.parametrize("every", [1, 64])
def test_columns_take_any_shape_and_reject_ids_out_of_range(every):
    sizes = np.random.default_rng(3).integers(4, 40, 500) * 8
    ref, ci = reference(sizes, 3), compact(sizes, 3, every)
    ids = np.random.default_rng(4).integers(0, 500, (4, 7))
    assert np.array_equal(ci.offsets[ids], ref.offsets[ids])
    assert np.array_equal(ci.nbytes[ids.astype(np.int32)], sizes[ids])
    assert np.array_equal(ci.offsets[10:20], ref.offsets[10:20])
    with pytest.raises(IndexError):
        ci.nbytes[np.array([500])]
    with pytest.raises(IndexError):
        ci.offsets[500]
