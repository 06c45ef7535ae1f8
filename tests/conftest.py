import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
# MPI ranks and helper processes import this checkout's package, also when the venv's editable
# install points at another checkout (a git worktree beside the main one).
_ROOT = str(Path(__file__).resolve().parents[1])
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, os.environ.get("PYTHONPATH", "")) if p)

from mpirun import mpi_env  # noqa: E402


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
