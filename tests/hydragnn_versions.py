"""Which HydraGNN a test's MPI job runs: 3.0 (pip-installed in the venv) or 5.0 (the source tree
``tools/install.sh`` extracts to ``.venv/src/hydragnn-5.0``, put first on PYTHONPATH, upstream's
own route). 5.0 is skipped, with the reason, only where the shared vendor copy it is installed
from is absent; where that copy exists a missing install is a failure, not a skip."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ("3.0", "5.0")
SHARED_TAR = ROOT.parent / "shared" / "vendor" / "HydraGNN-5.0.tar.gz"
SRC5 = Path(os.environ.get("MDLOADER_HYDRAGNN5_SRC", ROOT / ".venv" / "src" / "hydragnn-5.0"))


def _unavailable(why: str):
    if SHARED_TAR.exists():
        pytest.fail(f"HydraGNN 5.0: {why}, although {SHARED_TAR} exists; run tools/install.sh")
    pytest.skip(f"HydraGNN 5.0 not installed ({why}) and no shared copy at {SHARED_TAR}; "
                "see docs/hydragnn-5.md")


def env_for(version: str) -> dict:
    """Extra environment for ``mpirun`` so its ranks import HydraGNN `version`."""
    if version == "3.0":
        return {}
    if not (SRC5 / "hydragnn" / "__init__.py").exists():
        _unavailable(f"no source tree at {SRC5}")
    missing = [m for m in ("torch_scatter", "vesin") if importlib.util.find_spec(m) is None]
    if missing:
        _unavailable(f"{', '.join(missing)} not installed")
    rest = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(SRC5), str(ROOT), rest) if p)}
