"""`mdloader check` on real ranks: byte-identical backends, exactly-once coverage, clean errors."""

import numpy as np
import pytest

from mdloader_plugin.loader.verify import coverage, run_check
from mdloader_plugin.sampling.schedule import Schedule
from mdloader_plugin.sources import synth
from mdloader_plugin.sources.adios import write_graphs
from mdloader_plugin.store.shard import ShardStore
from mpirun import ROOT, mdloader, mpirun


@pytest.fixture(scope="module")
def small_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("check")
    out = {}
    for n in (2, 23, 101, 301):
        out[n] = d / f"m{n}.bp"
        write_graphs(out[n], {"trainset": list(synth.generate("hydragnn", n, 0, n))})
    return out


@pytest.mark.mpi
@pytest.mark.parametrize("ranks,n,batch,extra", [
    (1, 101, 7, []),
    (2, 301, 64, ["--drop-last"]),
    (4, 23, 1, ["--no-shuffle"]),  # 23 = 4 x 5 + 3: the tail is padded
])
def test_check_ok(small_files, ranks, n, batch, extra):
    r = mdloader(ranks, ["check", small_files[n], "--batch-size", batch, "--epochs", 2, *extra],
                 timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == (
        f"check ok: {ranks} ranks, 2 epochs, {n} samples, backends onesided,collective,auto")


@pytest.mark.mpi
@pytest.mark.slow
def test_check_3001_graphs_3_ranks_batch_7(synth_file):
    """The core issue's acceptance run."""
    r = mdloader(3, ["check", synth_file, "--batch-size", 7, "--epochs", 2,
                     "--backends", "onesided,collective,auto"], timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == (
        "check ok: 3 ranks, 2 epochs, 3001 samples, backends onesided,collective,auto")


@pytest.mark.mpi
@pytest.mark.parametrize("args,words", [
    (["--batch-size", "0"], "--batch-size must be a positive integer"),
    (["--backends", "onesided,rdma"], "unknown backend 'rdma'"),
    (["--epochs", "-1"], "--epochs must be a positive integer"),
    (["--order", "fast"], "--order: 'fast' is unknown; choose one of auto, torch, feistel"),
    (["--index", "full", "--index-share", "node"], "--index-share: node needs the compact index"),
    ("more-ranks", "run with at most 2 ranks"),
    ("missing", "no such file"),
])
def test_bad_arguments_fail_on_every_rank_with_one_line(small_files, tmp_path, args, words):
    path = small_files[2] if args != "missing" else tmp_path / "nope.bp"
    argv = ["check", path, "--batch-size", "4"]
    argv += args if isinstance(args, list) else []
    r = mdloader(3 if args == "more-ranks" else 2, argv, timeout=90)  # 2 samples, 3 ranks
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("mdloader: error:")]
    assert len(lines) == 1 and words in lines[0], r.stderr[-2000:]
    assert "Traceback" not in r.stderr


def test_check_detects_corrupted_bytes(small_files):
    store = ShardStore.from_file(None, str(small_files[101]), digests=True)
    first, _ = run_check(store, ["onesided"], batch_size=8, epochs=1, seed=0)
    assert first is None
    victim = 42
    o = int(store.offsets[victim]) + int(store.nbytes[victim]) - 3
    store.buffer[o] ^= 0xFF  # flip a byte of sample 42's payload
    first, _ = run_check(store, ["onesided", "collective"], batch_size=8, epochs=1, seed=0)
    assert first is not None and first.sample == victim and first.epoch == 0
    assert "differ from the owner's record" in str(first)


@pytest.mark.mpi
def test_check_passes_the_scale_options(small_files):
    """--order feistel and a node-shared index reach the loader and the store (the log says so)
    and the check still holds: same bytes from every backend, every sample once."""
    r = mdloader(2, ["check", small_files[301], "--batch-size", 16, "--order", "feistel",
                     "--index-share", "node", "--backends", "onesided,collective"], timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == (
        "check ok: 2 ranks, 1 epochs, 301 samples, backends onesided,collective")
    assert "one copy per node (2 ranks)" in r.stderr and "(feistel)" in r.stderr, r.stderr[-3000:]


@pytest.mark.mpi
def test_coverage_finds_injected_duplicate_missing_and_stray_ids_on_3_ranks():
    # the ids' exchange cut at 64 bytes (MDLOADER_MPI_MAX_COUNT): one Alltoallv and pieces
    r = mpirun(3, [ROOT / "tests" / "mpi_scripts" / "coverage_inject.py"], timeout=180,
               env={"MDLOADER_MPI_MAX_COUNT": "64"})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout[-2000:] + r.stderr[-3000:]


@pytest.mark.parametrize("drop_last", [True, False])
def test_coverage_in_one_process(drop_last):
    core = Schedule(101, 1, 8, drop_last=drop_last, seed=1, order="feistel")
    served = core.rank_indices(0, 0)
    assert coverage(None, core, 0, 0, served) is None
    dup = served.copy()
    dup[5] = dup[6]  # id dup[6] twice, the old dup[5] never
    got = coverage(None, core, 0, 0, dup)
    want = (int(served[6]), "served 2 times with drop_last") if drop_last else \
        (int(served[5]), "never served in the epoch")
    assert (got.sample, got.what) == want
