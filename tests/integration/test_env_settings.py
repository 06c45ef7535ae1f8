"""Every documented ``MDLOADER_*`` setting a loader reads reaches the loaders that HydraGNN's
driver (``mdloader train hydragnn`` with the demo recipe), fairchem's loader group and the
``create_dataloaders`` drop-in build: nothing fills in its own value over the environment
(``MDLOADER_PROFILE`` used to be replaced by ``profile: local``). A profile that does not exist
or does not parse stops every rank with one line naming it. 2 real MPI ranks a run."""

from __future__ import annotations

import json

import pytest

from mpirun import ROOT, mdloader, mpirun

SCRIPT = ROOT / "tests" / "mpi_scripts" / "env_settings.py"
INTEGRATIONS = ("hydragnn", "fairchem", "dropin")


def run(which: str, path: str, **env: str):
    return mpirun(2, [SCRIPT, which, path], env=env, timeout=240)


def loaded(proc) -> list[dict]:
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("SETTINGS "))
    return json.loads(line[len("SETTINGS "):])


@pytest.mark.parametrize("which", ["fairchem"])  # the others: every test that runs them
def test_defaults_without_variables(which, split_file):
    for s in loaded(run(which, split_file)):
        assert (s["profile"], s["prefetch_bytes"], s["producer"]) == ("local", 32 << 20, "thread")


@pytest.mark.parametrize("which", INTEGRATIONS)
def test_variables_reach_every_loader(which, split_file, tmp_path):
    from mdloader_plugin.estimator.profile import get_profile

    prof = get_profile("frontier").to_json()
    prof["name"] = "calibrated-here"
    path = tmp_path / "calibrated.json"
    path.write_text(json.dumps(prof))
    got = loaded(run(which, split_file, MDLOADER_PROFILE=str(path), MDLOADER_PREFETCH_MIB="3",
                     MDLOADER_PRODUCER="process", MDLOADER_LOG_LEVEL="ERROR"))
    # the process producer was removed: MDLOADER_PRODUCER=process is still accepted (one
    # deprecation line) and every loader runs the thread producer
    producer = "thread"
    assert got and all(s == {"backend": s["backend"], "profile": "calibrated-here",
                             "prefetch_bytes": 3 << 20, "producer": producer,
                             "log_level": "ERROR"} for s in got), got
    if which == "hydragnn":  # a shipped profile by name
        got = loaded(run(which, split_file, MDLOADER_PROFILE="perlmutter"))
        assert {s["profile"] for s in got} == {"perlmutter"}


@pytest.mark.parametrize("which,bad", [("hydragnn", "missing"), ("fairchem", "missing"),
                                       ("dropin", "not-json")])
def test_bad_profile_is_one_line_on_every_rank(which, bad, split_file, tmp_path):
    path = tmp_path / "prof.json"
    if bad == "not-json":
        path.write_text("{ not json")
    proc = run(which, split_file, MDLOADER_PROFILE=str(path))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("mdloader: error:")]
    assert errors and all(str(path) in ln for ln in errors), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_train_hydragnn_uses_the_profile_variable(split_file, tmp_path):
    """The driver end to end: ``mdloader train hydragnn`` on the demo recipe logs the profile
    its cost model used."""
    proc = mdloader(2, ["train", "hydragnn", "--config", str(ROOT / "recipes/hydragnn/demo.yaml"),
                        "--set", f"Dataset.path={split_file}", "--set",
                        "NeuralNetwork.Training.num_epoch=1", "--set", "run_name=envprof"],
                    env={"MDLOADER_PROFILE": "frontier"}, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "model (frontier)" in proc.stdout + proc.stderr
