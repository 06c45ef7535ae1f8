"""The one-sided backend's small-step path (planned on Python lists) serves exactly what its
numpy path serves: same layout, same bytes, same traffic, no MPI for an all-local step."""

import pytest


@pytest.mark.parametrize("ranks", [2, 3])
def test_small_step_path_equals_numpy_path(ranks, small_steps):
    r = small_steps(ranks)  # one launch with the collective backend's check (conftest.py)
    assert f"onesided small ok: {ranks} ranks" in r.stdout, r.stdout + r.stderr[-3000:]
