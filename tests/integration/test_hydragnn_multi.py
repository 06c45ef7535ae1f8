"""recipes/hydragnn/multi (molecules + bulk crystals, two files) on 4 MPI ranks with HydraGNN 3.0.

One job on 4 ranks (:func:`_job`, in the launch the 4-rank modules share a version:
tests/common/shared_jobs.py) trains the recipe's GIN through the CLI's entry point:
``loader: mdloader`` (one store over both files) and ``loader: hydragnn`` (HydraGNN's own loader
over the concatenation of the per-file datasets). With proportional sampling the two orders agree
by construction (a DistributedSampler permutation of the concatenated ids), so the losses must be
identical. A third run uses per-file weights (``weights`` sampling) and ``group_size: auto`` (the
estimator sizes the groups over both files) and must train. Plus one-line
config errors. The 2-branch multibranch model that routes on ``dataset_name`` (HydraGNN 5.0) is
test_hydragnn_multibranch.py; the tensor itself is checked in tests/unit/sources/test_multi_mpi.py.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest

from checks import check  # noqa: E402
from mpirun import ROOT, mdloader  # noqa: E402

RECIPE = ROOT / "recipes" / "hydragnn" / "multi.yaml"
WEIGHTED = ["Dataset.path=[{name: molecules, path: gfm/molecules.bp, weight: 0.3}, "
            "{name: bulk, path: gfm/bulk.bp, weight: 0.7}]"]
RUNS = {"mdloader": ["loader=mdloader"], "hydragnn": ["loader=hydragnn"],
        "weighted": ["loader=mdloader", "mdloader.group_size=auto", *WEIGHTED]}
pytestmark = [pytest.mark.mpi]


def _job(out: str) -> None:
    from mpi4py import MPI

    from mdloader_plugin.integrations.hydragnn import driver

    comm = MPI.COMM_WORLD
    common = ["Dataset.path=[{name: molecules, path: gfm/molecules.bp}, "
              "{name: bulk, path: gfm/bulk.bp}]", "NeuralNetwork.Training.num_epoch=2", "seed=3"]
    logs = {}
    for name, extra in RUNS.items():
        args = argparse.Namespace(config=str(RECIPE), set=common + extra + [f"run_name={name}"])
        code = driver.main(args)
        check(code == 0, f"run {name} exited {code}")
        logs[name] = Path("logs", name, "run.log").read_text() if comm.rank == 0 else ""
    if comm.rank == 0:
        Path(out).write_text(json.dumps(logs))


SHARED_JOBS = ("3.0",)  # the job runs in the launch these modules share a version


def shared_job(version: str, work: Path) -> list:
    """The job's data in `work`; the arguments of :func:`_job` (tests/common/shared_jobs.py)."""
    from mdloader_plugin.sources import synth_atoms

    synth_atoms.write_set(str(work / "gfm"), "molecules", (84, 18, 18), seed=6)
    synth_atoms.write_set(str(work / "gfm"), "bulk", (28, 6, 6), seed=6)
    return [work / "logs.json"]


@pytest.fixture(scope="module")
def work(shared_jobs, request):
    return shared_jobs.work("3.0", request.module)


@pytest.fixture(scope="module")
def job(shared_jobs, request):
    run = shared_jobs.result("3.0", request.module)
    return json.loads((run["work"] / "logs.json").read_text())


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_four_ranks_two_files_same_losses_as_hydragnn_loader(job):
    from test_hydragnn_mpi import _losses

    ours, theirs = _losses(job["mdloader"]), _losses(job["hydragnn"])
    assert len(ours) == 2 and ours == theirs
    weighted = _losses(job["weighted"])
    assert len(weighted) == 2 and weighted != ours
    assert all(math.isfinite(float(v)) for row in weighted for v in row)


@pytest.mark.parametrize("path,words", [
    ("[{name: a, path: gfm/molecules.bp, weight: -1}, {name: b, path: gfm/bulk.bp}]",
     "weight of a must be a number >= 0"),
    ("[{name: a, path: gfm/molecules.bp}, {name: b, path: gfm/none.bp}]", "none.bp: no such"),
])
def test_bad_multi_file_config_is_one_line(work, path, words):
    res = mdloader(2, ["train", "hydragnn", "--config", RECIPE, "--set", f"Dataset.path={path}"],
                   cwd=work, timeout=240)
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("mdloader: error:")]
    assert len(lines) == 1 and words in lines[0], res.stderr[-2000:]

