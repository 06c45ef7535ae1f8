import pytest

from mpirun import ROOT, mpirun


@pytest.fixture(scope="session")
def small_steps():
    """``small_steps(ranks)``: the one launch on `ranks` ranks of
    tests/mpi_scripts/small_steps.py that runs both backends' small-step checks (301 records),
    shared by test_onesided.py and test_collective.py."""
    runs = {}

    def run(ranks: int):
        if ranks not in runs:
            runs[ranks] = mpirun(ranks, [ROOT / "tests" / "mpi_scripts" / "small_steps.py",
                                         "301"], timeout=300)
        return runs[ranks]
    return run
