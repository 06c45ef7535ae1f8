"""One decision for the job: ranks that read different machine profiles still run one backend.

An MPMD launch gives rank 0 one profile and ranks 1-3 another, each rating a different backend
faster for the job. Rank 0 decides and broadcasts; it logs one ``MDLOADER-AGREE`` warning line
naming the ranks and the profiles, and ``mdloader check --backends auto`` runs to its end. (Before,
rank 0 entered the collective exchange while the others did Gets, until the fetch watchdog
aborted the job.) Under both MPI families: Open MPI's ``mpiexec -x NAME=VALUE`` and MPICH's
``-env NAME VALUE``. Ranks given different data files stop with one error line instead (under
Open MPI).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mdloader_plugin.estimator.profile import PROFILE_DIR
from mpirun import ROOT, family_missing, launcher, mpi_env

pytestmark = pytest.mark.mpi


def slowed(prefix: str) -> dict:
    """The shipped ``local`` profile with every latency of `prefix`'s backend 100x larger, so
    the model rates the other backend faster."""
    doc = json.loads((PROFILE_DIR / "local.json").read_text())
    for key, entry in doc["params"].items():
        if key.startswith(prefix) and key.split(".")[1].startswith("t_"):
            entry["value"] = min(entry["value"] * 100, 0.5)
    doc["name"] = f"slow-{prefix.rstrip('.')}"
    return doc


def mpmd(family: str, parts: list[tuple[int, dict, list]]) -> list[str]:
    """``mpiexec -n N <env> mdloader ARGS : -n M <env> mdloader ARGS``, each part's environment
    in the family's own flags."""
    cmd = [launcher(family)]
    for i, (n, env, args) in enumerate(parts):
        cmd += [":"] if i else []
        cmd += ["-n", str(n)]
        for k, v in env.items():
            cmd += ["-x", f"{k}={v}"] if family == "openmpi" else ["-env", k, str(v)]
        cmd += [sys.executable, "-m", "mpi4py", "-m", "mdloader_plugin", *map(str, args)]
    return cmd


def run(family: str, parts: list, timeout: float = 240) -> subprocess.CompletedProcess:
    if family_missing(family):
        pytest.skip(family_missing(family))
    return subprocess.run(mpmd(family, parts), capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=mpi_env({"MDLOADER_FETCH_TIMEOUT": "10"}, family))


@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_ranks_with_different_profiles_run_one_backend(family, split_file, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(slowed("os.")))    # rank 0: collective is faster
    b.write_text(json.dumps(slowed("coll.")))  # ranks 1-3: one-sided is faster
    args = ["check", split_file, "--batch-size", 2, "--epochs", 1, "--backends", "auto"]
    r = run(family, [(1, {"MDLOADER_PROFILE": a}, args), (3, {"MDLOADER_PROFILE": b}, args)])
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert "check ok: 4 ranks, 1 epochs, 30 samples, backends auto" in out, out[-3000:]
    warn = [ln for ln in out.splitlines() if "MDLOADER-AGREE" in ln]
    assert len(warn) == 1, out[-3000:]
    assert f"rank 0 {a}" in warn[0] and f"ranks 1-3 {b}" in warn[0], warn[0]
    chosen = {ln.split("backend=")[1].split()[0] for ln in out.splitlines()
              if "MDLOADER-BACKEND" in ln and "switched=no" in ln}
    assert chosen == {"collective"}, out[-3000:]  # rank 0's profile's choice


def test_ranks_with_different_data_files_stop_in_one_line(synth_file, split_file):
    """Different data files are an error, not a warning: one line naming the ranks and files,
    exit 2 on every rank, before any rank reads a byte. (Open MPI only: the decision's
    broadcast and the MPMD launch under MPICH are the test above.)"""
    args = lambda f: ["check", f, "--batch-size", 4, "--backends", "onesided"]  # noqa: E731
    r = run("openmpi", [(1, {}, args(synth_file)), (3, {}, args(split_file))], timeout=120)
    errors = [ln for ln in r.stderr.splitlines() if "mdloader: error" in ln]
    assert r.returncode == 2 and len(errors) == 1, r.stdout[-2000:] + r.stderr[-3000:]
    assert (f"ranks disagree on the data files (data: rank 0 {synth_file} (" in errors[0]
            and f"; ranks 1-3 {split_file} (" in errors[0]
            and "give every rank the same file(s)" in errors[0]), errors[0]
