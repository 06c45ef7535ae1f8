"""Which HydraGNN a test's MPI job runs: 3.0 (pip-installed in the venv), 5.0, main (d251f81) or
main527 (main with the named data schema, 88063418): source trees ``tools/install.sh`` extracts
to ``.venv/src/hydragnn-<version>``, put first on PYTHONPATH, upstream's own route. 5.0, main and
main527 are each skipped, with the reason,
only where the shared vendor copy they are installed from is absent; where that copy exists a
missing install is a failure, not a skip."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ("3.0", "5.0", "main", "main527")
#: The versions whose configs carry ``NeuralNetwork.Variables_of_interest`` (positional); main527
#: reads a top-level ``Variables`` section instead (the named data schema).
POSITIONAL = ("3.0", "5.0", "main")
VENDOR = ROOT.parent / "shared" / "vendor"
SHARED_TARS = {"5.0": VENDOR / "HydraGNN-5.0.tar.gz",
               "main": VENDOR / "HydraGNN-main-d251f81.tar.gz",
               "main527": VENDOR / "HydraGNN-main-88063418.tar.gz"}
SHARED_TAR = SHARED_TARS["5.0"]
SRCS = {"5.0": Path(os.environ.get("MDLOADER_HYDRAGNN5_SRC",
                                   ROOT / ".venv" / "src" / "hydragnn-5.0")),
        "main": Path(os.environ.get("MDLOADER_HYDRAGNN_MAIN_SRC",
                                    ROOT / ".venv" / "src" / "hydragnn-main")),
        "main527": Path(os.environ.get("MDLOADER_HYDRAGNN_MAIN527_SRC",
                                       ROOT / ".venv" / "src" / "hydragnn-main527"))}
SRC5 = SRCS["5.0"]


def _unavailable(version: str, why: str):
    tar = SHARED_TARS[version]
    if tar.exists():
        pytest.fail(f"HydraGNN {version}: {why}, although {tar} exists; run tools/install.sh")
    pytest.skip(f"HydraGNN {version} not installed ({why}) and no shared copy at {tar}; "
                "see docs/hydragnn-5.md")


def source_of(version: str, importable: bool = True) -> Path:
    """The source tree of HydraGNN `version` (5.0, main or main527), checked as :func:`env_for` does
    (`importable`: also the extensions ``import hydragnn`` needs)."""
    src = SRCS[version]
    if not (src / "hydragnn" / "__init__.py").exists():
        _unavailable(version, f"no source tree at {src}")
    if not importable:
        return src
    missing = [m for m in ("torch_scatter", "vesin") if importlib.util.find_spec(m) is None]
    if missing:
        _unavailable(version, f"{', '.join(missing)} not installed")
    return src


def env_for(version: str) -> dict:
    """Extra environment for ``mpirun`` so its ranks import HydraGNN `version`."""
    if version == "3.0":
        return {}
    src = source_of(version)
    rest = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(src), str(ROOT), rest) if p)}
