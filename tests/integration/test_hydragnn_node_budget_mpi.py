"""``NeuralNetwork.Training.Batching: {mode: node_budget}`` (HydraGNN main's cost-aware batches)
in ``mdloader train hydragnn`` on 4 MPI ranks: MDLoader serves the batches upstream's own
``DistributedCostAwareBatchSampler`` makes (``loader: hydragnn`` runs upstream's
``create_dataloaders(batching=...)``), so the losses are identical; a budget below the largest
graph with ``oversized_sample: error`` is one line naming the graph and its node count; on
HydraGNN 5.0 the key is refused in one line."""

from __future__ import annotations

import re

import pytest

from hydragnn_versions import env_for
from mpirun import ROOT, mdloader

DEMO = ROOT / "recipes" / "hydragnn" / "demo.yaml"
EPOCH = re.compile(r"Epoch: (\d+), Train Loss: (\S+), Val Loss: (\S+), Test Loss: (\S+)")
BUDGET = "NeuralNetwork.Training.Batching={mode: node_budget, max_nodes: 300, max_graphs: 12}"
pytestmark = [pytest.mark.mpi, pytest.mark.slow]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from mdloader_plugin.sources import synth
    from mdloader_plugin.sources.adios import write_graphs

    work = tmp_path_factory.mktemp("node_budget")
    g = list(synth.generate("hydragnn", 17, 0, 160))
    write_graphs(work / "d.bp", {"trainset": g[:112], "valset": g[112:136],
                                 "testset": g[136:]})
    return work


def _train(work, loader, extra=(), version="main", ranks=4):
    return mdloader(ranks, ["train", "hydragnn", "--config", DEMO, "--set", "Dataset.path=d.bp",
                        "--set", "NeuralNetwork.Training.num_epoch=2", "--set", "seed=4",
                        "--set", f"loader={loader}", "--set", f"run_name=nb-{loader}",
                        *[x for e in extra for x in ("--set", e)]],
                    cwd=work, timeout=900, env=env_for(version))


@pytest.mark.timeout(1200)
def test_node_budget_batches_equal_upstreams_sampler(data):
    logs = {}
    for loader in ("mdloader", "hydragnn"):
        res = _train(data, loader, [BUDGET])
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        logs[loader] = [m.groups()[1:] for m in
                        EPOCH.finditer((data / "logs" / f"nb-{loader}" / "run.log").read_text())]
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
