"""The MPICH family (Cray MPICH's, on Perlmutter and Frontier) in CI: the PyPI ``mpich`` wheel's
``mpiexec`` starts the ranks and mpi4py loads its ``libmpi.so.12`` (``MPI4PY_LIBMPI``), in the same
venv as the Open MPI runs of every other MPI test. A lean set, each a real job: every backend
with replica groups, several data sets, a killed rank ending the job, one HydraGNN training, and
the launch check catching an mpi4py that loads another MPI than the launcher's.

Run any other MPI test under MPICH with ``pytest --mpi-family=mpich tests/unit/mpi/test_x.py``
(tests/common/mpirun.py)."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from mpirun import ROOT, family_missing, launcher, mdloader, mpi_env, mpirun

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(bool(family_missing("mpich")),
                                 reason=family_missing("mpich") or "")]
MPICH = {"family": "mpich"}


def ok(r):
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r.stdout


def test_ranks_are_one_mpich_world():
    code = ("from mpi4py import MPI; c = MPI.COMM_WORLD; v = MPI.Get_library_version(); "
            "got = c.gather((c.rank, c.size, v.splitlines()[0].split()[-1])); "
            "c.rank or print('RANKS', *got)")
    out = ok(mpirun(3, ["-c", code], **MPICH))
    assert "RANKS (0, 3, '5.0.2') (1, 3, '5.0.2') (2, 3, '5.0.2')" in out, out
    assert "MPICH" in ok(mpirun(1, ["-c", "from mpi4py import MPI; "
                                          "print(MPI.Get_library_version())"], **MPICH))


def test_check_every_backend_and_replica_groups(synth_file):
    out = ok(mdloader(3, ["check", synth_file, "--batch-size", 7, "--epochs", 2,
                          "--group-size", "1,3"], timeout=300, **MPICH))
    assert out.strip().splitlines()[-1] == (
        "check ok: 3 ranks, 2 epochs, 3001 samples, backends onesided,collective,auto, "
        "group sizes 1,3")


@pytest.fixture(scope="module")
def three_files(tmp_path_factory):
    from mdloader_plugin.sources import synth
    from mdloader_plugin.sources.adios import write_graphs

    d = tmp_path_factory.mktemp("mpich_multi")
    out = []
    for name, seed, n in (("qm", 1, 41), ("oc", 2, 17), ("mp", 3, 9)):
        out.append(d / f"{name}.bp")
        write_graphs(out[-1], {"trainset": list(synth.generate("hydragnn", seed, 0, n))},
                     attributes={"dataset_name": name})
    return out


def test_check_three_data_sets(three_files):
    out = ok(mdloader(3, ["check", *three_files, "--sampling", "temperature:temperature=2",
                          "--batch-size", 3, "--epochs", 2], timeout=300, **MPICH))
    assert out.strip().splitlines()[-1] == (
        "check ok: 3 ranks, 2 epochs, 67 samples, backends onesided,collective,auto; "
        "data sets qm 41, oc 17, mp 9; sampling temperature")


@pytest.mark.parametrize("backend", ["onesided", "collective"])
def test_killed_rank_ends_the_job(backend):
    t0 = time.time()
    r = mpirun(3, [ROOT / "tests" / "mpi_scripts" / "rank_kill.py", backend, 1, 3, "allreduce"],
               timeout=150, **MPICH)
    out = r.stdout + r.stderr
    assert "rank 1: killing myself at step 3" in out, out[-3000:]
    assert r.returncode != 0 and "outlived a dead rank" not in out, out[-3000:]
    assert re.search(r"KILLED BY SIGNAL: 9|signal 9", out), out[-3000:]  # hydra names it
    assert time.time() - t0 < 120


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_hydragnn_trains_on_three_ranks(split_file, tmp_path):
    r = mdloader(3, ["train", "hydragnn", "--config", str(ROOT / "recipes/hydragnn/demo.yaml"),
                     "--set", f"Dataset.path={split_file}", "--set",
                     "NeuralNetwork.Training.num_epoch=2", "--set", "run_name=mpich"],
                 cwd=tmp_path, timeout=400, **MPICH)
    ok(r)
    from mdloader_plugin.core.epochlog import parse_epoch_lines

    recs = parse_epoch_lines((tmp_path / "logs" / "mpich" / "run.log").read_text().splitlines())
    assert sorted(r["epoch"] for r in recs) == [0, 1]
    assert {r["loader"] for r in recs} == {"mdloader"}
    losses = re.findall(r"Epoch: \d+, Train Loss: ([0-9.e+-]+)",
                        (tmp_path / "logs" / "mpich" / "run.log").read_text())
    assert len(losses) == 2 and all(float(x) == float(x) for x in losses)


def test_openmpi_mpi4py_under_mpich_launcher_stops_every_rank(synth_file):
    """The wrong-MPI case: MPICH's mpiexec starts 3 processes whose mpi4py loads the Open MPI
    wheel, so each is a world of one. Every rank exits 2; one line names both sizes."""
    cmd = [launcher("mpich"), "-n", "3", sys.executable, "-m", "mpi4py", "-m",
           "mdloader_plugin", "check", str(synth_file)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                       env=mpi_env(family="openmpi"), cwd=ROOT)
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-3000:]
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("mdloader: error:")]
    assert len(errors) == 1 and errors[0].startswith(
        "mdloader: error: MPI world size 1 but PMI_SIZE=3: "), r.stderr[-3000:]
