"""HydraGNN 5.0 and main on 4 real MPI ranks: what 5.0 users run, with ``loader: mdloader`` and with
HydraGNN's own loader over the same file, losses identical.

One job on 4 ranks (:func:`_job`, in the launch the 4-rank modules share a version:
tests/common/shared_jobs.py; HydraGNN 5.0 or main first on PYTHONPATH) trains, 2 epochs
each on small files: the demo GIN, the MLIP recipe (EGNN, energy + forces in the loss), PNAPlus
(degree histogram from the whole train set) and the fp64 recipe, each with both loaders; then the
demo capped by ``HYDRAGNN_MAX_NUM_BATCH`` and a run continued from the first one
(``Training.continue``/``startfrom``). Two 2-rank jobs run the upstream-style example script
(recipes/hydragnn/upstream_style/train.py) with HydraGNN's ``create_dataloaders`` and with
MDLoader's drop-in.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
from pathlib import Path

import pytest

from hydragnn_versions import env_for  # noqa: E402
from mpirun import ROOT, mdloader, mpirun  # noqa: E402

RECIPES = ROOT / "recipes" / "hydragnn"
DEMO, MLIP, FP64 = RECIPES / "demo.yaml", RECIPES / "mlip.yaml", RECIPES / "fp64.yaml"
PNAPLUS = ["NeuralNetwork.Architecture.mpnn_type=PNAPlus", "NeuralNetwork.Architecture.radius=2.0",
           "NeuralNetwork.Architecture.num_radial=4",
           "NeuralNetwork.Architecture.envelope_exponent=5"]
PAIRS = {  # name -> (recipe, data file, extra overrides); each runs with both loaders
    "demo": (DEMO, "d.bp", []),
    "mlip": (MLIP, "m.bp", []),
    "pnaplus": (DEMO, "d.bp", PNAPLUS),
    "fp64": (FP64, "d.bp", []),
}
EPOCH = re.compile(r"Epoch: (\d+), Train Loss: (\S+), Val Loss: (\S+), Test Loss: (\S+)")
TASKS = re.compile(r"Tasks Train Loss: \[([^\]]*)\]")
NTRAIN = 96


# -- the MPI job ----------------------------------------------------------------------------------
def _train(name: str, recipe, data: str, extra: list[str]) -> dict:
    from mpi4py import MPI

    from mdloader_plugin.integrations.hydragnn import driver

    args = argparse.Namespace(config=str(recipe), set=[
        f"Dataset.path={data}", "NeuralNetwork.Training.num_epoch=2",
        "NeuralNetwork.Training.batch_size=8", "seed=5", "mdloader.backend=collective",
        f"run_name={name}", *extra])
    code = driver.main(args)
    rank0 = MPI.COMM_WORLD.rank == 0
    log = Path("logs", name, "run.log").read_text() if rank0 else ""
    cfg = json.loads(Path("logs", name, "config.json").read_text()) if rank0 else {}
    return {"code": code, "log": log, "pna_deg": cfg.get("NeuralNetwork", {}).get(
        "Architecture", {}).get("pna_deg")}


def _job(work: str, out: str) -> None:
    from mpi4py import MPI

    from mdloader_plugin.integrations.hydragnn import compat

    os.chdir(work)
    runs = {}
    for name, (recipe, data, extra) in PAIRS.items():
        for loader in ("mdloader", "hydragnn"):
            runs[f"{name}-{loader}"] = _train(f"{name}-{loader}", recipe, data,
                                              extra + [f"loader={loader}"])
    os.environ["HYDRAGNN_MAX_NUM_BATCH"] = "2"
    runs["capped"] = _train("capped", DEMO, "d.bp", ["loader=mdloader"])
    del os.environ["HYDRAGNN_MAX_NUM_BATCH"]
    runs["continued"] = _train("continued", DEMO, "d.bp", [
        "loader=mdloader", "NeuralNetwork.Training.continue=1",
        "NeuralNetwork.Training.startfrom=demo-mdloader"])
    if MPI.COMM_WORLD.rank == 0:
        Path(out).write_text(json.dumps({"version": compat.version(), "runs": runs}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module", params=("5.0", "main"))
def version(request):
    return request.param


@pytest.fixture(scope="module")
def env(version):
    return env_for(version)


SHARED_JOBS = ("5.0", "main")  # the job runs in the launch these modules share a version


def shared_job(version: str, work: Path) -> list:
    """The job's data in `work`; the arguments of :func:`_job` (tests/common/shared_jobs.py).
    One folder a version: the runs' logs and checkpoints (same run names) must not meet."""
    from mdloader_plugin.sources import synth
    from mdloader_plugin.sources.adios import write_graphs

    for kind, name in (("hydragnn", "d.bp"), ("mlip", "m.bp")):
        g = list(synth.generate(kind, 13, 0, NTRAIN + 48))
        write_graphs(work / name, {"trainset": g[:NTRAIN], "valset": g[NTRAIN:NTRAIN + 24],
                                   "testset": g[NTRAIN + 24:]})
    return [work, work / f"summary-{version}.json"]


@pytest.fixture(scope="module")
def work(shared_jobs, version, request):
    return shared_jobs.work(version, request.module)


@pytest.fixture(scope="module")
def job(shared_jobs, version, request):
    run = shared_jobs.result(version, request.module)
    out = run["work"] / f"summary-{version}.json"
    return {**json.loads(out.read_text()), "stdout": run["stdout"], "want_version": version}


def _losses(log: str) -> list[tuple[str, str, str]]:
    return [m.groups()[1:] for m in EPOCH.finditer(log)]


pytestmark = [pytest.mark.mpi, pytest.mark.slow, pytest.mark.timeout(1800)]


# -- the tests ------------------------------------------------------------------------------------
def test_the_job_ran_the_hydragnn_asked_for(job):
    assert job["version"] == job["want_version"]
    assert all(run["code"] == 0 for run in job["runs"].values())


@pytest.mark.parametrize("name", list(PAIRS))
def test_mdloader_and_hydragnns_loader_give_identical_losses(job, name):
    mdl, hyd = job["runs"][f"{name}-mdloader"], job["runs"][f"{name}-hydragnn"]
    assert len(_losses(mdl["log"])) == 2, mdl["log"][-2000:]
    assert _losses(mdl["log"]) == _losses(hyd["log"])


def test_mlip_trains_energy_and_forces(job):
    tasks = TASKS.findall(job["runs"]["mlip-mdloader"]["log"])
    assert tasks, "no per-task losses logged"
    values = [float(v) for v in tasks[0].split(",")]
    assert len(values) == 3 and values[2] > 0  # energy, energy per atom, forces


def test_pnaplus_histogram_counts_every_train_node(job):
    from mdloader_plugin.sources import synth

    nodes = sum(g["x"].shape[0] for g in synth.generate("hydragnn", 13, 0, NTRAIN))
    assert sum(job["runs"]["pnaplus-mdloader"]["pna_deg"]) == nodes


def test_fp64_batches_reach_the_model_as_float64(job):
    assert "first_batch_float_dtype=torch.float64" in job["stdout"]
    assert "model_param_dtype=torch.float64" in job["stdout"]


def test_batch_capped_epochs_still_write_their_lines(job):
    from mdloader_plugin.core.epochlog import parse_epoch_lines

    recs = parse_epoch_lines(job["runs"]["capped"]["log"].splitlines())
    assert [(r["epoch"], r["steps"], r["samples"]) for r in recs] == [(0, 2, 64), (1, 2, 64)]


def test_continue_starts_from_the_earlier_checkpoint(job):
    first = [float(t) for t, _, _ in _losses(job["runs"]["demo-mdloader"]["log"])]
    cont = job["runs"]["continued"]["log"]
    assert "Load existing model: ./logs/demo-mdloader/demo-mdloader.pk" in cont
    again = [float(t) for t, _, _ in _losses(cont)]
    assert len(again) == 2 and again[0] < first[0]  # it did not start from a fresh model


def test_upstream_style_script_with_the_drop_in_matches_hydragnns_loader(env, work):
    script = RECIPES / "upstream_style" / "train.py"
    cfg = RECIPES / "upstream_style" / "gin.json"
    logs = {}
    for loader in ("hydragnn", "mdloader"):
        res = mpirun(2, [script, "--inputfile", cfg, "--adios", work / "d.bp", "--loader", loader,
                         "--num_epoch", "2", "--log", f"up-{loader}"], cwd=work, timeout=900,
                     env={**env, "HYDRAGNN_MASTER_PORT": str(_free_port())})
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        logs[loader] = (work / "logs" / f"up-{loader}" / "run.log").read_text()
    assert len(_losses(logs["mdloader"])) == 2
    assert _losses(logs["mdloader"]) == _losses(logs["hydragnn"])


@pytest.mark.timeout(300)
def test_mixed_vocabulary_stops_every_rank_with_one_line(env, tmp_path):
    res = mdloader(2, ["train", "hydragnn", "--config", DEMO, "--set",
                       "NeuralNetwork.Architecture.model_type=PNA"], cwd=tmp_path, timeout=240,
                   env=env)
    lines = [ln for ln in res.stderr.splitlines() if "mdloader: error:" in ln]
    assert res.returncode != 0 and len(lines) == 1, res.stderr
    assert "model_type: 'PNA'" in lines[0] and "keep only mpnn_type" in lines[0]
    assert not (tmp_path / "logs").exists()

