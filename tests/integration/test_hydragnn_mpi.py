"""HydraGNN training on 4 real MPI ranks: loader switch, identical losses, no hang on errors.

Everything runs against HydraGNN 3.0, 5.0 and main (:mod:`hydragnn_versions`; main527's
named-schema configs: test_hydragnn_main527_mpi.py). One job on 4 ranks (:func:`_job`) trains
the demo GIN four times on a 600-graph set — ``loader: mdloader`` with the one-sided and
the collective backend, ``loader: hydragnn`` with and without preload — through the same entry
point the CLI uses, and then drives HydraGNN's own graph-size scan
(``check_if_graph_size_variable``, which abandons iteration at a data-dependent batch) directly on
collective-backend MDLoaders, followed by a full epoch. Importing HydraGNN once per job keeps this
affordable on 2 cores (the job runs in the launch the 4-rank modules share a version:
tests/common/shared_jobs.py); the tests assert on the job's JSON summary.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from hydragnn_versions import POSITIONAL  # noqa: E402
from mpirun import ROOT, mdloader  # noqa: E402

DEMO = ROOT / "recipes" / "hydragnn" / "demo.yaml"
RUNS = {  # run name -> overrides
    "onesided": ["loader=mdloader", "mdloader.backend=onesided"],
    "collective": ["loader=mdloader", "mdloader.backend=collective"],
    "baseline": ["loader=hydragnn"],
    "preload": ["loader=hydragnn", "hydragnn_loader.preload=true"],
    "groups": ["loader=mdloader", "mdloader.backend=onesided", "mdloader.width=2"],  # 2 groups
    # HydraGNN's own Dataset.path form: one file a split (the same graphs as d.bp)
    "splits": ["loader=mdloader", "mdloader.backend=onesided",
               "Dataset.path={{train: {dir}/t.bp, validate: {dir}/v.bp, test: {dir}/s.bp}}"],
}
BACKEND = {"onesided": "onesided", "collective": "collective", "groups": "onesided",
           "splits": "onesided"}
EPOCH = re.compile(r"Epoch: (\d+), Train Loss: (\S+), Val Loss: (\S+), Test Loss: (\S+)")


# -- the MPI job ----------------------------------------------------------------------------------
def _job(data: str, out: str) -> None:
    from mpi4py import MPI

    from mdloader_plugin.integrations.hydragnn import driver

    comm = MPI.COMM_WORLD
    common = [f"Dataset.path={data}", "NeuralNetwork.Training.num_epoch=3",
              "NeuralNetwork.Training.batch_size=16", "seed=5"]
    from mdloader_plugin.integrations.hydragnn import compat

    summary: dict = {"runs": {}, "version": compat.version()}
    for name, extra in RUNS.items():
        extra = [e.format(dir=Path(data).parent) for e in extra]
        args = argparse.Namespace(config=str(DEMO), set=common + extra + [f"run_name={name}"])
        code = driver.main(args)
        log = Path("logs", name, "run.log").read_text() if comm.rank == 0 else ""
        summary["runs"][name] = {"code": code, "log": log}
    summary["scan"] = _scan_then_epoch(data, comm)
    if comm.rank == 0:
        Path(out).write_text(json.dumps(summary))


def _scan_then_epoch(data: str, comm) -> dict:
    """HydraGNN's real graph-size scan over collective MDLoaders, then one full epoch."""
    from mdloader_plugin.integrations.hydragnn import compat, graphs
    from mdloader_plugin.loader.loader import MDLoader
    from mdloader_plugin.store.shard import ShardStore
    from mdloader_plugin.mpi.world import World

    world = World.detect(comm)
    to_sample = graphs.make_to_sample(None, None)
    loaders = [MDLoader(ShardStore.from_file(world, data, label), batch_size=8,
                        backend="collective", to_sample=to_sample, name=label)
               for label in ("trainset", "valset", "testset")]
    variable = bool(compat.get("check_if_graph_size_variable")(*loaders))
    loaders[0].set_epoch(1)
    steps = sum(1 for _ in loaders[0])
    for loader in loaders:
        loader.close()
        loader.store.close()
    world.close()
    return {"variable": variable, "steps": comm.allgather(steps)}


# -- the tests ------------------------------------------------------------------------------------
def _losses(log: str) -> list[tuple[str, str, str]]:
    return [m.groups()[1:] for m in EPOCH.finditer(log)]


SHARED_JOBS = POSITIONAL  # the job runs in the launch these modules share a version


def shared_job(version: str, work: Path) -> list:
    """The job's data in `work`; the arguments of :func:`_job` (tests/common/shared_jobs.py)."""
    from mdloader_plugin.sources import synth
    from mdloader_plugin.sources.adios import write_graphs

    graphs = list(synth.generate("hydragnn", 11, 0, 600))
    write_graphs(work / "d.bp", {"trainset": graphs[:480], "valset": graphs[480:540],
                                 "testset": graphs[540:]})
    for name, label, part in (("t", "trainset", graphs[:480]), ("v", "valset", graphs[480:540]),
                              ("s", "testset", graphs[540:])):
        write_graphs(work / f"{name}.bp", {label: part})
    return [work / "d.bp", work / "summary.json"]


@pytest.fixture(scope="module", params=POSITIONAL)
def job(request, shared_jobs):
    run = shared_jobs.result(request.param, request.module)
    out = run["work"] / "summary.json"
    return {**json.loads(out.read_text()), "want_version": request.param}


pytestmark = [pytest.mark.mpi]


@pytest.mark.slow
@pytest.mark.timeout(1600)
def test_every_run_trains_and_logs_epoch_lines(job):
    from mdloader_plugin.core.epochlog import parse_epoch_lines

    assert job["version"] == job["want_version"]  # the job ran the HydraGNN it was meant to
    for name, run in job["runs"].items():
        assert run["code"] == 0, name
        recs = parse_epoch_lines(run["log"].splitlines())
        assert [r["epoch"] for r in recs] == [0, 1, 2], name
        assert all(r["samples"] == 480 and r["run"] == name for r in recs), name
        want = ("mdloader", BACKEND[name]) if name in BACKEND else ("hydragnn", "-")
        assert {(r["loader"], r["backend"]) for r in recs} == {want}, name
        assert len(_losses(run["log"])) == 3, name


@pytest.mark.slow
@pytest.mark.timeout(1600)
def test_loss_goes_down_over_three_epochs(job):
    for name, run in job["runs"].items():
        train = [float(t) for t, _, _ in _losses(run["log"])]
        assert train[2] < train[0], (name, train)


@pytest.mark.slow
@pytest.mark.timeout(1600)
def test_onesided_and_collective_give_identical_losses(job):
    assert _losses(job["runs"]["onesided"]["log"]) == _losses(job["runs"]["collective"]["log"])


@pytest.mark.slow
@pytest.mark.timeout(1600)
def test_replica_groups_give_identical_losses(job):
    """mdloader.width=2 (2 groups of 2 ranks, each a whole copy): the same batches, so the same
    losses as one copy over all 4 ranks."""
    assert _losses(job["runs"]["groups"]["log"]) == _losses(job["runs"]["onesided"]["log"])


@pytest.mark.slow
@pytest.mark.timeout(1600)
def test_mapping_of_split_files_gives_the_losses_of_the_one_file(job):
    """``Dataset.path: {train: t.bp, validate: v.bp, test: s.bp}`` (HydraGNN's form) trains on
    the same graphs as the one file holding all three splits: the same losses."""
    assert _losses(job["runs"]["splits"]["log"]) == _losses(job["runs"]["onesided"]["log"])


@pytest.mark.slow
@pytest.mark.timeout(1600)
def test_mdloader_feeds_the_same_batches_as_hydragnn_loader(job):
    assert _losses(job["runs"]["onesided"]["log"]) == _losses(job["runs"]["baseline"]["log"])
    assert _losses(job["runs"]["baseline"]["log"]) == _losses(job["runs"]["preload"]["log"])


@pytest.mark.slow
@pytest.mark.timeout(1600)
def test_graph_size_scan_does_not_desynchronise_collective_backend(job):
    assert job["scan"]["variable"] is True  # molecule sizes vary
    assert job["scan"]["steps"] == [job["scan"]["steps"][0]] * 4 and job["scan"]["steps"][0] > 0


@pytest.mark.timeout(300)
def test_unknown_loader_is_one_line_and_exits_nonzero_on_all_ranks(tmp_path):
    res = mdloader(2, ["train", "hydragnn", "--config", DEMO, "--set", "loader=pytorch"],
                   cwd=tmp_path, timeout=240)
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if "mdloader: error:" in ln]
    assert len(lines) == 1, res.stderr
    assert "loader: 'pytorch' is unknown; choose one of mdloader, hydragnn" in lines[0]
    assert not (tmp_path / "logs").exists()


@pytest.mark.timeout(300)
def test_missing_data_file_is_one_line_from_rank_0(tmp_path):
    res = mdloader(2, ["train", "hydragnn", "--config", DEMO, "--set", "Dataset.path=none.bp"],
                   cwd=tmp_path, timeout=240)
    lines = [ln for ln in res.stderr.splitlines() if "mdloader: error:" in ln]
    assert res.returncode != 0 and len(lines) == 1, res.stderr
    assert "Dataset.path none.bp: no such file" in lines[0]

