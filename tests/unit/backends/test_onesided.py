"""The one-sided backend's small-step path (planned on Python lists) serves exactly what its
numpy path serves: same layout, same bytes, same traffic, no MPI for an all-local step."""

import pytest

from mpirun import ROOT, mpirun


@pytest.mark.parametrize("ranks", [2, 3])
def test_small_step_path_equals_numpy_path(ranks):
    r = mpirun(ranks, [ROOT / "tests" / "mpi_scripts" / "onesided_small.py", "301"], timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"onesided small ok: {ranks} ranks" in r.stdout
