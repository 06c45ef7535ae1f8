"""The user's MPI is the user's: importing the package changes none of the MPI's settings.

An ``OMPI_MCA_osc=^ucx`` written at import (as the package once did, for the Open MPI wheel on
machines without UCX hardware) switches off UCX's one-sided component, the fast path of the
one-sided backend, for the whole process on an Open MPI + InfiniBand cluster. So every module
of the package is imported in a fresh interpreter with a clean environment, and the variables
of the MPI libraries and their fabrics must be as they were. Where these machines need the
setting, the Makefile, tools/install.sh (the venv's ``etc`` and ``activate``), the tests
(tests/common/mpirun.py) and the emulated cluster's launcher set it, explicitly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the variables of Open MPI, PRRTE/PMIx, MPICH, libfabric and UCX
PREFIXES = ("OMPI_", "PRTE_", "PMIX_", "MPICH_", "MPIR_CVAR_", "FI_", "UCX_")

# in the child: every module of the package but the entry points (``__main__`` runs a command),
# and the Hydra plugin (every Hydra application of the environment imports it);
# a module that needs a framework version the venv lacks is imported as far as it goes
CHILD = r"""
import importlib, json, os, pkgutil, sys
prefixes = tuple(sys.argv[1].split(","))
def mpi_vars():
    return {k: v for k, v in os.environ.items() if k.startswith(prefixes)}
before = mpi_vars()
import mdloader_plugin
names = ["mdloader_plugin", "hydra_plugins.mdloader_plugin_searchpath.searchpath"]
for info in pkgutil.walk_packages(mdloader_plugin.__path__, "mdloader_plugin."):
    if info.name.rsplit(".", 1)[-1] != "__main__":
        names.append(info.name)
failed, missing, changed = {}, {}, {}
for name in names:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:  # a framework version this venv lacks (HydraGNN 5.0)
        if (exc.name or "").startswith("mdloader_plugin"):
            failed[name] = f"{type(exc).__name__}: {exc}"
        else:
            missing[name] = exc.name
    except Exception as exc:
        failed[name] = f"{type(exc).__name__}: {exc}"
    now = mpi_vars()
    if now != before and not changed:
        changed = {"module": name, "before": before, "after": now}
print(json.dumps({"imported": len(names) - len(failed) - len(missing), "failed": failed,
                  "missing": missing, "changed": changed}))
"""


def _clean_env() -> dict:
    """The interpreter's bare needs, and none of the MPI settings the Makefile or an activated
    venv exports."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's package
    env["OMP_NUM_THREADS"] = "1"
    return env


def test_importing_every_module_changes_no_mpi_variable():
    res = subprocess.run([sys.executable, "-c", CHILD, ",".join(PREFIXES)], env=_clean_env(),
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["changed"] == {}, f"importing {out['changed']['module']} changed the MPI's " \
        f"environment: {out['changed']['before']} -> {out['changed']['after']}"
    assert out["failed"] == {}, out["failed"]
    # the upstream HydraGNN modules need HydraGNN 5.0 or main (the venv has 3.0): the rest all
    assert set(out["missing"].values()) <= {"hydragnn.utils.datasets"}, out["missing"]
    assert out["imported"] > 100  # the walk reached the whole package


def test_the_emulated_clusters_launcher_passes_the_open_mpi_setting_itself(monkeypatch):
    """``mdloader cluster run`` starts Open MPI's mpiexec with the setting in the job's own
    environment (the package no longer puts it into the process's)."""
    from mdloader_plugin.devtools.cluster.launch import mpi_env

    for key in [k for k in os.environ if k.startswith(PREFIXES)]:
        monkeypatch.delenv(key)
    env = mpi_env(family="openmpi")
    assert env["OMPI_MCA_osc"] == "^ucx"
    assert "OMPI_MCA_osc" not in os.environ
    monkeypatch.setenv("OMPI_MCA_osc", "ucx")  # the user's own choice wins
    assert mpi_env(family="openmpi")["OMPI_MCA_osc"] == "ucx"
