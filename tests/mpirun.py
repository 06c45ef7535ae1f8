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

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MPIEXEC = str(BIN / "mpiexec")

# The launcher settings the emulated cluster uses too (one list, in the package).
MPI_ENV = {**CLUSTER_MPI_ENV, "PYTHONUNBUFFERED": "1"}


def mpi_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update(MPI_ENV)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra or {})
    return env


def mpirun(n: int, args: list[str], *, timeout: float = 180, env: dict | None = None,
           cwd: str | os.PathLike | None = None, module: bool = False) -> subprocess.CompletedProcess:
    """Launch ``python -m mpi4py ARGS`` on `n` ranks; ARGS is a script path plus its arguments,
    or (``module=True``) a module name plus arguments. Output is captured as text."""
    cmd = [MPIEXEC, "-n", str(n), sys.executable, "-m", "mpi4py"]
    cmd += (["-m"] if module else []) + [str(a) for a in args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=mpi_env(env), cwd=cwd or ROOT)


def mdloader(n: int, args: list[str], **kw) -> subprocess.CompletedProcess:
    """``mpiexec -n N python -m mpi4py -m mdloader_plugin ARGS`` (the ``mdloader`` CLI)."""
    return mpirun(n, ["mdloader_plugin", *args], module=True, **kw)
