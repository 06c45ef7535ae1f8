import pytest

from mpirun import mpirun


@pytest.fixture(scope="session")
def four_rank_store_checks():
    """One 4-rank launch of tests/mpi_scripts/store_checks.py runs the node-shared index check
    (test_shared_index.py) and the replica copy check (test_replicate.py): each prints its
    ``<check> ok`` line, and a failing check names its rank and what differs."""
    return mpirun(4, ["tests/mpi_scripts/store_checks.py", "shared,replicate"], timeout=240)
