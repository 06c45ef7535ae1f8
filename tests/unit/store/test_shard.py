"""store/shard: a rank's records are the codec bytes of its block, the index names every sample,
the memory report adds up, close is idempotent and a closed store refuses reads."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mdloader_plugin.core.errors import DataError, MemoryBudgetError
from mdloader_plugin.records import codec
from mdloader_plugin.sources import synth
from mdloader_plugin.sources.adios import write_graphs
from mdloader_plugin.store import budget
from mdloader_plugin.store.shard import ShardStore

from mpirun import mpirun

SCRIPT = "tests/mpi_scripts/store_checks.py"
N = 50


@pytest.fixture(scope="module")
def mols(tmp_path_factory):
    path = tmp_path_factory.mktemp("shard") / "mols.bp"
    write_graphs(path, {"trainset": list(synth.generate("hydragnn", 7, 0, N))})
    return path


def check_one_rank(st, graphs):
    sizes = [codec.record_size(g) for g in graphs]
    assert st.num_samples == len(graphs) and st.local_range == (0, len(graphs))
    for i, g in enumerate(graphs):
        assert np.array_equal(st.local_record(i), codec.encode(g)), i
    ids = np.arange(len(graphs))
    assert st.nbytes[ids].tolist() == sizes
    assert st.offsets[ids].tolist() == np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    assert st.owner_of(ids).tolist() == [0] * len(graphs)
    rep = st.memory_report()
    assert rep["records_bytes"] == st.buffer.nbytes == sum(sizes) == rep["dataset_bytes"]
    assert (rep["samples_local"], rep["samples_global"]) == (len(graphs), len(graphs))
    assert rep["index_bytes"] == st.index.memory_bytes()["index_bytes"] > 0
    assert rep["index_shared_bytes"] == 0


def test_from_samples_one_rank():
    graphs = list(synth.generate("hydragnn", 7, 0, 20))
    st = ShardStore.from_samples(None, graphs, 20)
    check_one_rank(st, graphs)
    with pytest.raises(IndexError, match=r"^sample 20 is not on this rank \(owns 0\.\.19\)$"):
        st.local_record(20)
    st.close()


def test_digests_add_8_bytes_a_sample():
    graphs = list(synth.generate("hydragnn", 7, 0, 20))
    plain = ShardStore.from_samples(None, graphs, 20)
    dig = ShardStore.from_samples(None, graphs, 20, digests=True)
    assert dig.digests.dtype == np.uint64 and dig.digests.size == 20
    assert len(set(dig.digests.tolist())) == 20
    assert (dig.memory_report()["index_bytes"]
            == plain.memory_report()["index_bytes"] + 8 * 20)


def test_full_index_is_16_bytes_a_sample_plus_block_starts():
    graphs = list(synth.generate("hydragnn", 7, 0, 20))
    st = ShardStore.from_samples(None, graphs, 20, index="full")
    check_one_rank(st, graphs)
    assert st.memory_report()["index_bytes"] == 16 * 20 + 8 * 2


def test_from_file_one_rank(mols):
    graphs = list(synth.generate("hydragnn", 7, 0, N))
    st = ShardStore.from_file(None, str(mols))
    check_one_rank(st, graphs)
    assert st.meta["label"] == "trainset" and st.meta["path"] == str(mols)
    assert st.meta["bytes_read"] == st.meta["bytes_read_all_ranks"] > 0
    assert st.meta["keys"] == list(graphs[0])


def test_from_file_keys_subset(mols):
    graphs = [{k: g[k] for k in ("x", "y")} for g in synth.generate("hydragnn", 7, 0, N)]
    st = ShardStore.from_file(None, str(mols), keys=["x", "y"])
    check_one_rank(st, graphs)


def test_budget_names_how_many_ranks_would_fit(mols, monkeypatch):
    monkeypatch.setattr(budget, "LOAD_FIXED_BYTES", 0)  # a tiny file: the arithmetic alone
    with pytest.raises(MemoryBudgetError) as e:
        ShardStore.from_file(None, str(mols), max_memory_per_rank="100KiB")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{mols} [trainset]: rank 0 needs ")
    assert "max_memory_per_rank is 100.0 KiB" in msg, msg
    assert re.search(r"while loading \(.* of records \+ .* of index \+ .* of load buffers\)",
                     msg), msg
    assert re.search(r": run with at least \d+ ranks, a larger group_size \(fewer replica "
                     r"groups\), --index-share node \(one index a node\), or raise "
                     r"max_memory_per_rank$", msg), msg


def test_unknown_label_is_a_data_error(mols):
    with pytest.raises(DataError, match="valset"):
        ShardStore.from_file(None, str(mols), label="valset")


def test_close_twice_and_use_after_close():
    graphs = list(synth.generate("hydragnn", 7, 0, 5))
    st = ShardStore.from_samples(None, graphs, 5)
    st.close()
    st.close()
    with pytest.raises(ValueError, match="the store is closed"):
        st.local_record(0)
    with pytest.raises(ValueError, match="the store is closed"):
        st.open_epoch()


@pytest.fixture(scope="module")
def three_ranks(mols, tmp_path_factory):
    """One 3-rank launch runs the samples, file and few checks; each prints ``<check> ok``."""
    two = tmp_path_factory.mktemp("few") / "two.bp"
    write_graphs(two, {"trainset": list(synth.generate("hydragnn", 7, 0, 2))})
    return mpirun(3, [SCRIPT, "samples,file,few", mols, N, two], timeout=180)


def _ok(r, check: str):
    assert f"{check} ok" in r.stdout, r.stdout[-2000:] + r.stderr[-3000:]


@pytest.mark.mpi
def test_from_samples_three_ranks(three_ranks):
    _ok(three_ranks, "samples")


@pytest.mark.mpi
def test_from_file_three_ranks(three_ranks):
    _ok(three_ranks, "file")


@pytest.mark.mpi
def test_fewer_samples_than_ranks_stops_every_rank(three_ranks):
    _ok(three_ranks, "few")
    assert three_ranks.returncode == 0, three_ranks.stderr[-3000:]
