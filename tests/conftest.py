import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mpirun import mpi_env  # noqa: E402


@pytest.fixture(scope="session")
def synth_file(tmp_path_factory):
    """A 3,001-graph synthetic HydraGNN-layout file shared by the session's tests."""
    from mdloader_plugin.sources import synth
    from mdloader_plugin.sources.adios import write_graphs

    path = tmp_path_factory.mktemp("data") / "mols.bp"
    write_graphs(path, {"trainset": list(synth.generate("hydragnn", 7, 0, 3001))})
    return path


@pytest.fixture
def env():
    return mpi_env()
