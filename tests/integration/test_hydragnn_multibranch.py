"""recipes/hydragnn/multibranch (HydraGNN 5.0 and main, two output branches, molecules + bulk
crystals) on 4 MPI ranks: it trains with ``loader: mdloader``, gives the same losses as
HydraGNN's own loader,
and every graph reaches the branch of its own data set.

One job on 4 ranks (:func:`_job`, in the launch the 4-rank modules share a version:
tests/common/shared_jobs.py; HydraGNN 5.0 or main first on PYTHONPATH) trains the recipe
through the CLI's entry point twice: ``loader: mdloader`` (one store over both files) and
``loader: hydragnn`` (HydraGNN's loader over the concatenation of the per-file datasets, each
graph tagged with its file's position). With proportional sampling the two orders agree by
construction (one DistributedSampler permutation of the concatenated ids), so the losses must be
identical.

A third run uses upstream's ``--oversampling`` split (``mdloader.sampling: {type: hydragnn,
oversampling: true}``): every rank trains on one data set, so each rank's train batches use one
branch only and must still train (the unused branch's parameters get DDP's zero gradient).

The routing probe wraps HydraGNN's ``Base.forward`` and hooks each branch's shared layers
(``graph_shared["branch-K"]``, the first module a graph meets after the trunk): per batch it
counts the graphs each branch receives, and tells each graph's data set from its atoms alone
(molecules are H/C/N/O, Z <= 8; the bulk crystals are EMT metals, Z >= 13), never from
``dataset_name``. Branch K must receive exactly the graphs of file K, in every batch of every
rank (train, validation and test). Ids that are missing, constant or swapped fail it.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest

from checks import check  # noqa: E402
from mpirun import ROOT  # noqa: E402

RECIPE = ROOT / "recipes" / "hydragnn" / "multibranch.yaml"
FILES = ("molecules", "bulk")  # branch-0, branch-1: their order in Dataset.path
RUNS = {"mdloader": ["loader=mdloader"], "hydragnn": ["loader=hydragnn"],
        # upstream's --oversampling: each rank draws from one data set only, so a rank's
        # batches leave the other branch unused (DDP must be told: find_unused_parameters)
        "oversampled": ["loader=mdloader",
                        "mdloader.sampling={type: hydragnn, oversampling: true}"]}
pytestmark = [pytest.mark.mpi]


def _kind_of_graphs(data) -> list[int]:
    """Each graph's data set told from its atoms alone: 0 (molecules, Z <= 8) or 1 (metals)."""
    import torch

    z = data.x[:, 0].to(torch.float64)
    zmax = torch.zeros(int(data.num_graphs), dtype=torch.float64).scatter_reduce(
        0, data.batch, z, reduce="amax", include_self=False)
    return (zmax > 10).long().tolist()


def _routing_probe(batches: list):
    """Wrap HydraGNN's Base.forward (per batch: graphs each branch gets, the graphs' kinds and
    ids); returns the original forward to put back."""
    from hydragnn.models.Base import Base

    forward, seen = Base.forward, {}

    def count(name):
        return lambda module, inputs, output: seen.__setitem__(
            name, seen.get(name, 0) + inputs[0].shape[0])

    def probed(self, data):
        if not getattr(self, "_mdloader_probe", False):
            for name, module in self.graph_shared.items():
                module.register_forward_hook(count(name))
            self._mdloader_probe = True
        seen.clear()
        out = forward(self, data)
        kinds = _kind_of_graphs(data)
        ids = data.dataset_name.view(-1).tolist() if hasattr(data, "dataset_name") else None
        batches.append({"rows": dict(seen), "kinds": kinds, "ids": ids})
        return out

    Base.forward = probed
    return forward


def _job(out: str) -> None:
    from mpi4py import MPI

    from mdloader_plugin.integrations.hydragnn import driver

    comm = MPI.COMM_WORLD
    common = ["Dataset.path=[{name: molecules, path: gfm/molecules.bp}, "
              "{name: bulk, path: gfm/bulk.bp}]", "NeuralNetwork.Training.num_epoch=2",
              "NeuralNetwork.Training.batch_size=16", "seed=3"]
    logs, routes = {}, {}
    for name, extra in RUNS.items():
        batches: list = []
        forward = _routing_probe(batches)
        args = argparse.Namespace(config=str(RECIPE), set=common + extra + [f"run_name={name}"])
        code = driver.main(args)
        check(code == 0, f"run {name} exited {code}")
        from hydragnn.models.Base import Base
        Base.forward = forward
        logs[name] = Path("logs", name, "run.log").read_text() if comm.rank == 0 else ""
        routes[name] = comm.gather(batches, root=0)
    if comm.rank == 0:
        Path(out).write_text(json.dumps({"logs": logs, "routes": routes}))


SHARED_JOBS = ("5.0", "main")  # the job runs in the launch these modules share a version


def shared_job(version: str, work: Path) -> list:
    """The job's data in `work`; the arguments of :func:`_job` (tests/common/shared_jobs.py)."""
    from mdloader_plugin.sources import synth_atoms

    synth_atoms.write_set(str(work / "gfm"), "molecules", (72, 12, 12), seed=6)
    synth_atoms.write_set(str(work / "gfm"), "bulk", (40, 8, 8), seed=6)
    return [work / "out.json"]


@pytest.fixture(scope="module", params=SHARED_JOBS)
def job(request, shared_jobs):
    run = shared_jobs.result(request.param, request.module)
    return json.loads((run["work"] / "out.json").read_text())


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_multibranch_trains_with_same_losses_as_hydragnn_loader(job):
    from test_hydragnn_mpi import _losses

    ours, theirs = _losses(job["logs"]["mdloader"]), _losses(job["logs"]["hydragnn"])
    assert len(ours) == 2 and ours == theirs
    assert "loader=mdloader" in job["logs"]["mdloader"]


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("run", list(RUNS))
def test_every_graph_reaches_its_own_branch(job, run):
    per_rank = job["routes"][run]
    assert len(per_rank) == 4 and all(per_rank), "every rank ran batches"
    both = set()
    for rank, batches in enumerate(per_rank):
        for i, b in enumerate(batches):
            expected = {f"branch-{k}": b["kinds"].count(k) for k in range(len(FILES))}
            expected = {k: v for k, v in expected.items() if v}
            assert b["rows"] == expected, (rank, i, b)
            assert b["ids"] == b["kinds"], (rank, i, b)
            both |= set(b["kinds"])
    assert both == {0, 1}, "both data sets (and so both branches) were seen"


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_oversampled_ranks_train_one_branch_each(job):
    from test_hydragnn_mpi import _losses

    # each rank's first batch is a train batch of epoch 1: one data set, 2 ranks a data set
    first = [sorted(set(batches[0]["kinds"])) for batches in job["routes"]["oversampled"]]
    assert sorted(first) == [[0], [0], [1], [1]], first
    losses = _losses(job["logs"]["oversampled"])
    assert len(losses) == 2 and all(math.isfinite(float(v)) for row in losses for v in row)

