"""The streamed load (store/load.py): the same bytes and index as encoding the whole block at
once, read in chunks no larger than the setting, and the ranks' checks before any data is
read (the load peak against the budget, the same data file on every rank)."""

from __future__ import annotations

import numpy as np
import pytest

from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.sources import synth
from mdloader_plugin.sources.adios import GraphFile, write_graphs
from mdloader_plugin.sources.multi import MultiSource, parse_specs
from mdloader_plugin.store import budget
from mdloader_plugin.store.load import chunks
from mdloader_plugin.store.options import StoreOptions
from mdloader_plugin.store.shard import ShardStore

from mpirun import ROOT, launcher, mdloader, mpi_env


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A molecule-like and an OC20-like file (edge_index [2, E], cells, fixed-shape keys)."""
    d = tmp_path_factory.mktemp("load")
    out = {}
    for kind, n in (("hydragnn", 61), ("oc20", 9)):
        out[kind] = d / f"{kind}.bp"
        write_graphs(out[kind], {"trainset": list(synth.generate(kind, 3, 0, n))})
    return out


def whole_block(path, label="trainset"):
    """The reference: every sample of the file encoded from one read of the whole block."""
    with GraphFile(path) as f:
        n = f.info(label).ndata
        return ShardStore.from_samples(None, f.read_block(label, 0, n), n)


def same(a, b):
    ids = np.arange(a.num_samples)
    assert a.buffer.tobytes() == b.buffer.tobytes()
    assert np.array_equal(np.asarray(a.offsets[ids]), np.asarray(b.offsets[ids]))
    assert np.array_equal(np.asarray(a.nbytes[ids]), np.asarray(b.nbytes[ids]))


@pytest.mark.parametrize("kind", ["hydragnn", "oc20"])
@pytest.mark.parametrize("chunk", [1, 5000, None])
def test_streamed_bytes_equal_the_whole_block(files, kind, chunk):
    same(ShardStore.from_file(None, str(files[kind]), load_chunk_bytes=chunk),
         whole_block(files[kind]))


def test_several_files_streamed_equal_their_samples(files):
    specs = [f"mols={files['hydragnn']}", f"slabs={files['oc20']}"]
    with MultiSource(parse_specs(specs)) as src:
        samples, _ = src.read_range(0, src.num_samples)
        ref = ShardStore.from_samples(None, samples, src.num_samples)
    for chunk in (1, 3000):
        same(ShardStore.from_files(None, specs, options=StoreOptions(load_chunk_bytes=chunk)),
             ref)


@pytest.mark.parametrize("chunk", [1, 4096, 20000])
def test_no_read_is_larger_than_a_chunk(files, monkeypatch, chunk):
    """Fails on the load that read the whole block at once (one read of 61 samples)."""
    reads, real = [], GraphFile.read_block

    def spy(self, label, start, stop, *a, **k):
        block = real(self, label, start, stop, *a, **k)
        reads.append((stop - start, sum(x.nbytes for x in block.arrays.values())))
        return block

    monkeypatch.setattr(GraphFile, "read_block", spy)
    store = ShardStore.from_file(None, str(files["hydragnn"]), load_chunk_bytes=chunk)
    assert sum(n for n, _ in reads) == store.num_samples
    assert all(n == 1 or nbytes <= chunk for n, nbytes in reads), reads
    assert len(reads) >= min(store.num_samples, store.buffer.nbytes // chunk)


def test_chunks_cover_the_block_in_order():
    sizes = np.array([8, 8, 40, 8, 8, 8, 16], np.int64)
    runs = list(chunks(sizes, 16))
    assert runs == [(0, 2), (2, 3), (3, 5), (5, 6), (6, 7)]
    assert list(chunks(sizes, 10**6)) == [(0, 7)]


def test_options_record_and_keywords_agree(files):
    with pytest.raises(TypeError, match="unexpected store option 'chunk'"):
        StoreOptions.of(chunk=3)
    opts = StoreOptions(digests=True, index="full")
    a = ShardStore.from_file(None, str(files["oc20"]), options=opts)
    b = ShardStore.from_file(None, str(files["oc20"]), digests=True, index="full")
    same(a, b)
    assert np.array_equal(a.digests, b.digests) and a.index.describe() == b.index.describe()
    assert StoreOptions.of(opts, index=None).index == "full"  # None: not given


def test_memory_report_has_the_load_peak(files):
    rep = ShardStore.from_file(None, str(files["hydragnn"])).memory_report()
    assert rep["steady_bytes"] == rep["records_bytes"] + rep["index_bytes"]
    assert rep["load_peak_bytes"] == budget.load_peak(rep["records_bytes"], rep["index_bytes"],
                                                      rep["samples_local"])
    assert rep["load_peak_bytes"] > rep["steady_bytes"]


@pytest.mark.mpi
def test_budget_below_the_load_peak_is_refused_on_every_rank(files):
    """A budget above records + index but below the load peak: today's check let it load."""
    path = str(files["oc20"])
    with GraphFile(path) as f:
        info = f.info("trainset")
        b = block_bounds(info.ndata, 2)
        rec = max(budget.predict_block(f, info, list(info.keys), int(b[r]), int(b[r + 1]))
                  for r in range(2))
    steady = rec + budget.index_bytes(info.ndata)  # what the budget counted before
    limit = steady + 1024  # below 2 ranks' load peak (its chunks)
    r = mdloader(2, ["check", path, "--batch-size", "2", "--backends", "onesided",
                     "--max-memory-per-rank", str(limit)], timeout=120)
    lines = [x for x in r.stderr.splitlines() if x.startswith("mdloader: error:")]
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert len(lines) == 1 and "while loading" in lines[0] and "max_memory_per_rank is" in \
        lines[0] and "run with at least " in lines[0] and "--index-share node" in \
        lines[0], r.stderr[-2000:]
    assert "Traceback" not in r.stderr


@pytest.mark.mpi
def test_ranks_loading_different_files_stop_with_one_line(files):
    """MPMD: rank 0 loads one file, rank 1 another. Today each rank loaded its own file and
    the job went on (or hung) with mixed data."""
    import subprocess
    import sys

    def part(path):
        return ["-n", "1", sys.executable, "-m", "mpi4py", "-m", "mdloader_plugin", "check",
                str(path), "--batch-size", "2", "--backends", "onesided"]

    cmd = [launcher(), *part(files["hydragnn"]), ":", *part(files["oc20"])]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=mpi_env(),
                       cwd=ROOT)
    lines = [x for x in r.stderr.splitlines() if x.startswith("mdloader: error:")]
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert len(lines) == 1, r.stderr[-2000:]
    assert "ranks disagree on the data files (data: rank 0 " in lines[0]
    assert "; rank 1 " in lines[0]
    assert str(files["hydragnn"]) in lines[0] and str(files["oc20"]) in lines[0]
