"""``NeuralNetwork.Training.Batching: {mode: node_budget}`` (HydraGNN main's cost-aware batches)
in ``mdloader train hydragnn`` on 4 MPI ranks: MDLoader serves the batches upstream's own
``DistributedCostAwareBatchSampler`` makes (``loader: hydragnn`` runs upstream's
``create_dataloaders(batching=...)``), so the losses are identical (the two trainings run in the
4-rank launch the modules share on HydraGNN main: tests/common/shared_jobs.py); a budget below the
largest graph with ``oversized_sample: error`` is one line naming the graph and its node count;
on HydraGNN 5.0 the key is refused in one line."""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

import pytest

from hydragnn_versions import env_for
from mpirun import ROOT, mdloader

DEMO = ROOT / "recipes" / "hydragnn" / "demo.yaml"
EPOCH = re.compile(r"Epoch: (\d+), Train Loss: (\S+), Val Loss: (\S+), Test Loss: (\S+)")
BUDGET = "NeuralNetwork.Training.Batching={mode: node_budget, max_nodes: 300, max_graphs: 12}"
pytestmark = [pytest.mark.mpi, pytest.mark.slow]


SHARED_JOBS = ("main",)  # the 4-rank trainings run in the launch these modules share


def _write_data(work: Path) -> None:
    from mdloader_plugin.sources import synth
    from mdloader_plugin.sources.adios import write_graphs

    g = list(synth.generate("hydragnn", 17, 0, 160))
    write_graphs(work / "d.bp", {"trainset": g[:112], "valset": g[112:136],
                                 "testset": g[136:]})


def shared_job(version: str, work: Path) -> list:
    """The job's data in `work`; the arguments of :func:`_job` (tests/common/shared_jobs.py)."""
    _write_data(work)
    return [work, work / "summary.json"]


def _job(work: str, out: str) -> None:
    """Both loaders train with the node budget, as ``mdloader train hydragnn`` runs them."""
    from mpi4py import MPI

    from mdloader_plugin.integrations.hydragnn import driver

    os.chdir(work)
    codes = {}
    for loader in ("mdloader", "hydragnn"):
        codes[loader] = driver.main(argparse.Namespace(config=str(DEMO), set=[
            "Dataset.path=d.bp", "NeuralNetwork.Training.num_epoch=2", "seed=4",
            f"loader={loader}", f"run_name=nb-{loader}", BUDGET]))
    if MPI.COMM_WORLD.rank == 0:
        Path(out).write_text(json.dumps(codes))


@pytest.fixture(scope="module")
def job(shared_jobs, request):
    run = shared_jobs.result("main", request.module)
    return {"work": run["work"], "codes": json.loads((run["work"] / "summary.json").read_text())}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    work = tmp_path_factory.mktemp("node_budget")
    _write_data(work)
    return work


def _train(work, loader, extra=(), version="main", ranks=4):
    return mdloader(ranks, ["train", "hydragnn", "--config", DEMO, "--set", "Dataset.path=d.bp",
                        "--set", "NeuralNetwork.Training.num_epoch=2", "--set", "seed=4",
                        "--set", f"loader={loader}", "--set", f"run_name=nb-{loader}",
                        *[x for e in extra for x in ("--set", e)]],
                    cwd=work, timeout=900, env=env_for(version))


@pytest.mark.timeout(1800)
def test_node_budget_batches_equal_upstreams_sampler(job):
    assert job["codes"] == {"mdloader": 0, "hydragnn": 0}
    logs = {loader: [m.groups()[1:] for m in EPOCH.finditer(
        (job["work"] / "logs" / f"nb-{loader}" / "run.log").read_text())]
        for loader in ("mdloader", "hydragnn")}
    assert len(logs["mdloader"]) == 2 and logs["mdloader"] == logs["hydragnn"]


@pytest.mark.timeout(400)
def test_budget_below_the_largest_graph_is_one_line(data):
    res = _train(data, "mdloader", ["NeuralNetwork.Training.Batching={mode: node_budget, "
                                    "max_nodes: 20}"], ranks=2)
    lines = [ln for ln in res.stderr.splitlines() if "mdloader: error:" in ln]
    assert res.returncode != 0 and len(lines) == 1, res.stderr[-3000:]
    assert re.search(r"max_nodes 20 is below graph \d+ of trainset's \d+ nodes", lines[0])


@pytest.mark.timeout(400)
def test_node_budget_on_5_0_is_refused(data):
    res = _train(data, "mdloader", [BUDGET], version="5.0", ranks=2)
    lines = [ln for ln in res.stderr.splitlines() if "mdloader: error:" in ln]
    assert res.returncode != 0 and len(lines) == 1 and "needs HydraGNN main" in lines[0]
