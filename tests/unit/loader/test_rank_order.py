"""Issue 16's hang: every rank must enter the loader's MPI calls in the same order, and no rank
may stop its other threads while it waits for the rest.

Two orderings found by reading the code paths (the hang seen once: one rank in its first
``Win.Get`` of a loader while the others sat in an allreduce):

- the online trial's per-step reduction used mpi4py's pickled ``allreduce``, whose first call on
  a communicator creates a hidden duplicate while holding the GIL: the waiting rank's other
  Python threads (trainer, producer, the one-sided progress thread a Get's target may need)
  stopped until every rank arrived (``first_allreduce_gil.py``);
- taking over the early next-epoch steps was decided rank by rank: a rank that read the whole
  epoch took them over while one that abandoned it fetched them again, one exchange more than
  the others (``takeover_mismatch.py``: MPI_ERR_TRUNCATE in the collective's Alltoallv).
"""

import pytest

from mpirun import mpirun

PROFILE = "tests/data/profile-2x2-1gbit-no-node.json"  # the model keeps the probe: the check is on


@pytest.mark.mpi
@pytest.mark.timeout(200)
def test_other_threads_run_while_the_loader_waits_in_its_step_reduction():
    r = mpirun(2, ["tests/mpi_scripts/first_allreduce_gil.py", PROFILE], timeout=150)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("first step served while the other thread ran") == 2


@pytest.fixture(scope="module")
def takeovers():
    """One 2-rank launch checks the three backends in turn (one ``takeover ok (BACKEND)`` line
    a rank and backend)."""
    return mpirun(2, ["tests/mpi_scripts/takeover_mismatch.py", "collective,auto,onesided", 64,
                      4], timeout=300)


@pytest.mark.mpi
@pytest.mark.timeout(400)
@pytest.mark.parametrize("backend", ["collective", "auto", "onesided"])
def test_early_next_epoch_steps_taken_over_by_all_ranks_or_none(backend, takeovers):
    lines = [ln for ln in takeovers.stdout.splitlines() if f"takeover ok ({backend})" in ln]
    assert len(lines) == 2, takeovers.stdout[-2000:] + takeovers.stderr[-3000:]
    if backend == "collective":  # one rank abandoned: every rank drops them
        assert all("'dropped': 1" in ln for ln in lines), lines
    # one-sided Gets alone (auto settles on one-sided here: the probe is skipped) are not
    # collective: ranks still take over or drop on their own, and the batches are the same
