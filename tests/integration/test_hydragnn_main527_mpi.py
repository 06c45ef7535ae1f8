"""HydraGNN main with the named data schema (main527) in ``mdloader train hydragnn``, 2 MPI ranks.

One mpiexec job (this file run as a script, main527 first on PYTHONPATH) trains
recipes/hydragnn/named.yaml (a top-level ``Variables`` section; upstream's own
``prepare_data_from_schema`` builds x/y/y_loc from the file's named keys) for 2 epochs with
``loader: mdloader`` and with HydraGNN's own loader over the same ``synth --kind gfm`` file:
the losses are identical and both write MDLOADER-EPOCH lines. Bad input: each variable form on
the version that does not read it (the positional demo on main527, the named recipe on main
d251f81) and a name the file does not hold are one line naming the version or file and the
key, exit 2 on every rank.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hydragnn_versions import env_for  # noqa: E402
from mpirun import ROOT, mdloader, mpi_env, mpirun  # noqa: E402

NAMED = ROOT / "recipes" / "hydragnn" / "named.yaml"
DEMO = ROOT / "recipes" / "hydragnn" / "demo.yaml"
EPOCH = re.compile(r"Epoch: (\d+), Train Loss: (\S+), Val Loss: (\S+), Test Loss: (\S+)")

pytestmark = [pytest.mark.mpi]


def _job(data: str, out: str) -> None:
    from mpi4py import MPI

    from mdloader_plugin.integrations.hydragnn import compat, driver

    summary: dict = {"version": compat.version(), "runs": {}}
    for name in ("mdloader", "hydragnn"):
        args = argparse.Namespace(config=str(NAMED), set=[
            f"Dataset.path={data}", "NeuralNetwork.Training.num_epoch=2",
            "NeuralNetwork.Training.batch_size=4", "seed=3", f"loader={name}",
            f"run_name={name}"])
        code = driver.main(args)
        log = Path("logs", name, "run.log").read_text() if MPI.COMM_WORLD.rank == 0 else ""
        summary["runs"][name] = {"code": code, "log": log}
    if MPI.COMM_WORLD.rank == 0:
        Path(out).write_text(json.dumps(summary))


def _gfm(work: Path, env: dict) -> Path:
    res = subprocess.run([sys.executable, "-m", "mdloader_plugin", "synth", "--kind", "gfm",
                          "--num-graphs", "40", "--split", "0.8,0.1,0.1", "--out", work / "gfm"],
                         capture_output=True, text=True, env=mpi_env(env), timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    return work / "gfm" / "ani1x.bp"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    env = env_for("main527")
    work = tmp_path_factory.mktemp("main527")
    data = _gfm(work, env)
    out = work / "summary.json"
    res = mpirun(2, [__file__, "--job", data, out], cwd=work, timeout=600, env=env)
    assert res.returncode == 0 and out.exists(), res.stdout[-3000:] + res.stderr[-3000:]
    return {**json.loads(out.read_text()), "data": data, "work": work}


def _losses(log: str):
    return [m.groups()[1:] for m in EPOCH.finditer(log)]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_named_schema_trains_with_both_loaders_and_the_same_losses(job):
    from mdloader_plugin.core.epochlog import parse_epoch_lines

    assert job["version"] == "main527"
    ours, base = job["runs"]["mdloader"], job["runs"]["hydragnn"]
    assert ours["code"] == 0 and base["code"] == 0
    assert len(_losses(ours["log"])) == 2 and _losses(ours["log"]) == _losses(base["log"])
    for name, run in job["runs"].items():
        recs = parse_epoch_lines(run["log"].splitlines())
        assert [r["epoch"] for r in recs] == [0, 1] and recs[0]["loader"] == name


def _refused(res, *words) -> None:
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("mdloader: error:")]
    assert res.returncode == 2 and len(lines) == 1, res.stdout[-2000:] + res.stderr[-3000:]
    for w in words:
        assert w in lines[0], lines[0]


@pytest.mark.timeout(300)
def test_positional_config_on_main527_is_one_line(job):
    res = mdloader(2, ["train", "hydragnn", "--config", DEMO, "--set",
                       f"Dataset.path={job['data']}"], cwd=job["work"], timeout=280,
                   env=env_for("main527"))
    _refused(res, "HydraGNN main527", "NeuralNetwork.Variables_of_interest", "Variables")


@pytest.mark.timeout(300)
def test_named_config_on_main_d251f81_is_one_line(job):
    res = mdloader(2, ["train", "hydragnn", "--config", NAMED, "--set",
                       f"Dataset.path={job['data']}"], cwd=job["work"], timeout=280,
                   env=env_for("main"))
    _refused(res, "HydraGNN main", "Variables", "Variables_of_interest")


@pytest.mark.timeout(300)
def test_a_name_the_file_lacks_is_one_line(job):
    res = mdloader(2, ["train", "hydragnn", "--config", NAMED, "--set",
                       f"Dataset.path={job['data']}", "--set",
                       "Variables.outputs=[{name: force, level: node, dim: 3}]"],
                   cwd=job["work"], timeout=280, env=env_for("main527"))
    _refused(res, "Variables.outputs[0].name 'force'", "ani1x.bp", "forces")


if __name__ == "__main__":
    if sys.argv[1] == "--job":
        _job(sys.argv[2], sys.argv[3])
