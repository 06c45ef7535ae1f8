import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "common"))  # the shared helpers
# MPI ranks and helper processes import this checkout's package, also when the venv's editable
# install points at another checkout (a git worktree beside the main one).
# tests/common/ too: MPI scripts anywhere below tests/ import the shared helpers (mpirun, checks).
_ROOT = Path(__file__).resolve().parents[1]
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(_ROOT), str(_ROOT / "tests" / "common"), os.environ.get("PYTHONPATH", "")) if p)

import mpirun  # noqa: E402
import xdist_schedule  # noqa: E402
from mpirun import mpi_env  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--mpi-family", choices=mpirun.FAMILIES, default="openmpi",
                     help="MPI the ranks of tests/common/mpirun.py launches run under by default")


def pytest_configure(config):
    mpirun.DEFAULT_FAMILY = config.getoption("--mpi-family")
    # make test's two workers (pytest-xdist): groups and order (tests/common/xdist_schedule.py)
    config.pluginmanager.register(xdist_schedule.Schedule(), "mdloader-xdist-schedule")


@pytest.fixture(scope="session")
def synth_file(tmp_path_factory):
    """A 3,001-graph synthetic HydraGNN-layout file shared by the session's tests."""
    from mdloader_plugin.sources import synth
    from mdloader_plugin.sources.adios import write_graphs

    path = tmp_path_factory.mktemp("data") / "mols.bp"
    write_graphs(path, {"trainset": list(synth.generate("hydragnn", 7, 0, 3001))})
    return path


@pytest.fixture(scope="session")
def split_file(tmp_path_factory) -> str:
    """A 40-graph HydraGNN-layout file with trainset (30), valset (5) and testset (5)."""
    from mdloader_plugin.sources import synth
    from mdloader_plugin.sources.adios import write_graphs

    path = tmp_path_factory.mktemp("split") / "small.bp"
    g = list(synth.generate("hydragnn", 3, 0, 40))
    write_graphs(path, {"trainset": g[:30], "valset": g[30:35], "testset": g[35:]})
    return str(path)


@pytest.fixture
def env():
    return mpi_env()


@pytest.fixture(scope="session")
def shared_jobs(request, tmp_path_factory):
    """The 4-rank launches the training test modules share, one a HydraGNN version or fairchem
    (tests/common/shared_jobs.py)."""
    from shared_jobs import SharedJobs

    return SharedJobs(request.session, tmp_path_factory)
