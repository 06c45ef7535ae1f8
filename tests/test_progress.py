"""The one-sided backend never depends on what the trainer is doing on the target rank."""

import pytest

from mpirun import mpirun

pytestmark = [pytest.mark.mpi]


@pytest.mark.parametrize("ranks", [3, 4])
def test_get_from_rank_blocked_in_gloo_allreduce(ranks):
    r = mpirun(ranks, ["tests/mpi_scripts/blocked_target.py", "onesided"], timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "blocked-target ok" in r.stdout
