"""recipes/fairchem/multi on 4 MPI ranks: two data sets (bulk, slabs), temperature sampling,
``loader: mdloader`` with both backends (identical per-rank step losses) and ``loader: fairchem``
(fairchem's own create_concat_dataset) over the same structures. One job (:func:`_job`, in the
4-rank launch the fairchem modules share: tests/common/shared_jobs.py) runs all three."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from mpirun import ROOT  # noqa: E402

RECIPE = ROOT / "recipes" / "fairchem" / "multi" / "cpu.yaml"
RUNS = {"onesided": ["loader=mdloader", "loader.backend=onesided"],
        "collective": ["loader=mdloader", "loader.backend=collective"],
        "baseline": ["loader=fairchem"]}
pytestmark = [pytest.mark.mpi, pytest.mark.slow]


SHARED_JOBS = ("fairchem",)  # the job runs in the launch the fairchem modules share


def shared_job(key: str, work: Path) -> list:
    """The job's data in `work`; the arguments of :func:`_job` (tests/common/shared_jobs.py)."""
    from mdloader_plugin.sources import synth_atoms

    for kind, counts in (("bulk", (40, 8, 0)), ("slabs", (12, 8, 0))):
        synth_atoms.write_set(str(work / "gfm"), kind, counts, seed=4, aselmdb=True)
    return [work / "gfm", work / "runs"]


def _job(data: str, runs: str) -> None:
    from test_fairchem_mpi import _job as train

    train(data, runs, list(RUNS), recipe=RECIPE, runs=RUNS, epochs=1)


@pytest.fixture(scope="module")
def job(shared_jobs, request):
    return shared_jobs.result("fairchem", request.module)["work"] / "runs"


@pytest.mark.timeout(900)
def test_four_ranks_two_data_sets_temperature_both_loaders(job):
    from test_fairchem_mpi import _epochs, _steps

    runs = job
    one, coll = _steps(runs, "onesided"), _steps(runs, "collective")
    assert one and one == coll  # same seed, same batches: identical per-rank step losses
    assert {r for r, *_ in one} == {"0", "1", "2", "3"}
    for name in RUNS:
        recs = _epochs(runs, name)
        assert [r["epoch"] for r in recs] == [0] and recs[0]["steps"] > 0
        assert all(math.isfinite(float(s[3])) for s in _steps(runs, name))
