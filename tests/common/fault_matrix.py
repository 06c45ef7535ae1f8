"""The fault matrix: which cells run, how one runs, what it measured and whether it met its target.

A *cell* is one small MPI job (3 ranks of ``tests/mpi_scripts/fault_cell.py``, the own loop of
docs/own-loop.md on a 300-graph file) in which one rank is hit by one fault at one phase
(:class:`Cell`). :func:`run_cells` runs several cells at once (at most :data:`PARALLEL`) and
measures each: the launcher's exit code, the seconds from the fault until the last rank of the
job is gone (every process carrying the cell's ``FAULT_CELL_ID`` marker), whether the cause's
line was printed and whether it was the first error line of the job. :func:`verdict` holds a
measurement against the cell's target; :func:`write_json` merges the measurements into the JSON
that ``bench/faults/figures.py`` turns into the table of docs/reliability.md.

Targets (issue 48): an exception or a ``MemoryError`` on one rank ends the job within
:data:`EXCEPTION_S` seconds with its own line first, whatever ``MDLOADER_FETCH_TIMEOUT`` is
(those cells run with T = 600 s, so only the error path can end them in time); a SIGKILLed or
SIGSTOPped rank ends the job within T plus a beat under a launcher that keeps the job alive
(Open MPI ``--enable-recovery``, MPICH ``-disable-auto-cleanup``), T = :data:`SHORT_T`; a rank
that stalls 3 T between steps (an evaluation) is never aborted, also without
``MPI_THREAD_MULTIPLE``.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mpirun import ROOT, launcher, mpi_env

SCRIPT = ROOT / "tests" / "mpi_scripts" / "fault_cell.py"
RANKS = 3
#: cells running at once (each 3 ranks: 9 processes on this 2-core machine)
PARALLEL = 3
#: T of the kill, stop and stall cells (seconds)
SHORT_T = 3
#: T of the exception cells: far beyond any target, so only the error path can end them in time
LONG_T = 600
#: an exception ends the job within this many seconds of the fault
EXCEPTION_S = 10.0
#: "a beat" of the kill/stop target: the watchdog's period at T = 3 (0.75 s) plus the launcher's
#: teardown, rounded up
BEAT_S = 2.0
#: a cell still running this many seconds after its fault is killed (recorded as not ended)
CELL_TIMEOUT_S = 40.0
#: ... and one whose fault never came after this many seconds from the launch
START_TIMEOUT_S = 150.0

EXCEPTIONS = ("exception", "backward", "memory", "producer", "watchdog")
KINDS = (*EXCEPTIONS, "kill", "stop", "stall")
PHASES = ("load", "first", "mid", "boundary", "close")
KIND_TEXT = {
    "exception": "exception in the trainer", "backward": "exception in loss.backward()",
    "memory": "MemoryError", "producer": "exception in the producer thread",
    "watchdog": "exception in the watchdog thread", "kill": "SIGKILL", "stop": "SIGSTOP",
    "stall": "healthy stall of 3 T (an evaluation)"}
PHASE_TEXT = {"load": "load", "first": "first step", "mid": "mid-epoch",
              "boundary": "epoch boundary", "close": "close"}

_seq = itertools.count()


@dataclass(frozen=True)
class Cell:
    """One fault at one phase of one job (module doc).

    ``entry``: ``python`` (the docs' command) or ``mpi4py`` (``python -m mpi4py``); ``form``:
    ``with`` (the loader in a ``with`` block) or ``plain`` (the docs' loop, ``close()`` at its
    end); ``threads``: ``multiple`` or ``serialized`` (MPI without ``MPI_THREAD_MULTIPLE``:
    the watchdog's fallback); ``hosts``: 1, or 2 emulated hosts (the cluster tests)."""

    kind: str
    phase: str = "mid"
    backend: str = "collective"
    family: str = "openmpi"
    entry: str = "python"
    form: str = "with"
    threads: str = "multiple"
    hosts: int = 1

    @property
    def id(self) -> str:
        parts = [self.family, f"{self.hosts}h", self.backend, self.kind, self.phase]
        if self.entry != "python":
            parts.append(self.entry)
        if self.form != "with":
            parts.append(self.form)
        if self.threads != "multiple":
            parts.append(self.threads)
        return "-".join(parts)

    @property
    def timeout_s(self) -> float:
        """T of the job: short where the watchdog is what ends (or must not end) it."""
        return SHORT_T if self.kind in ("kill", "stop", "stall") else LONG_T

    @property
    def victim(self) -> int:
        # on 2 hosts ranks 0-1 sit on host 0 and rank 2 on host 1: its watcher (rank 1) is
        # across the link
        return 2 if self.hosts > 1 else 1

    @property
    def epochs(self) -> int:
        # a fault that ends nothing leaves the job running until CELL_TIMEOUT_S; a stall and a
        # fault at close need the job to reach its end
        return 2 if self.kind == "stall" or self.phase == "close" else 1000

    @property
    def sync(self) -> bool:
        """A DDP-like allreduce every step: the others wait in the trainer, not in the loader
        (kill/stop/stall: without it, so the others' waits are the loader's own fetches)."""
        return self.kind in EXCEPTIONS

    @property
    def target(self) -> str:
        if self.kind in EXCEPTIONS:
            return f"ends <= {EXCEPTION_S:g} s, its line first"
        if self.kind == "stall":
            return "not aborted"
        return f"ends <= T + a beat ({self.timeout_s + BEAT_S:g} s)"

    def argv(self, data: Path) -> list[str]:
        script = [sys.executable] + (["-m", "mpi4py"] if self.entry == "mpi4py" else [])
        return script + [str(SCRIPT), str(data), self.kind, self.phase, self.backend,
                         str(self.victim), self.form, str(self.epochs)]

    def launcher_flags(self) -> list[str]:
        """A launcher that keeps the job alive after a rank dies (kill/stop cells)."""
        if self.kind not in ("kill", "stop"):
            return []
        return ["--enable-recovery"] if self.family == "openmpi" else ["-disable-auto-cleanup"]

    def env(self) -> dict:
        env = {"MDLOADER_FETCH_TIMEOUT": str(self.timeout_s),
               "FAULT_CELL_SYNC": "1" if self.sync else "0"}
        if self.threads != "multiple":
            env["MPI4PY_RC_THREAD_LEVEL"] = self.threads
        return env


# -- which cells ---------------------------------------------------------------------------------
def one_host_cells() -> list[Cell]:
    """The cells that exercise distinct code, one host (not the full cross product)."""
    cells = []
    for backend in ("onesided", "collective"):
        # every fault kind at mid-epoch, both backends, Open MPI
        cells += [Cell(kind, "mid", backend) for kind in KINDS]
        # the other entry points and the docs' loop without `with`
        cells += [Cell("exception", "mid", backend, entry="mpi4py"),
                  Cell("exception", "mid", backend, form="plain")]
        # the watchdog's fallback without MPI_THREAD_MULTIPLE must not abort a healthy stall
        cells.append(Cell("stall", "mid", backend, threads="serialized"))
    # every phase for the exception, on the backend whose close drains exchanges
    cells += [Cell("exception", phase, "collective") for phase in PHASES if phase != "mid"]
    # MPICH (Cray MPICH's family): the exception and the watchdog's cells
    for backend in ("onesided", "collective"):
        cells += [Cell("exception", "mid", backend, "mpich"), Cell("stop", "mid", backend, "mpich")]
    cells += [Cell("kill", "mid", "collective", "mpich"),
              Cell("producer", "mid", "onesided", "mpich"),
              Cell("stall", "mid", "collective", "mpich", threads="serialized")]
    return cells


def cluster_cells() -> list[Cell]:
    """Kill and stop across two emulated hosts (the victim on the other host than its watcher)."""
    return [Cell(kind, "mid", backend, family, hosts=2)
            for family in ("openmpi", "mpich") for kind in ("kill", "stop")
            for backend in ("onesided", "collective")
            if family == "openmpi" or backend == "collective"]


# -- running ------------------------------------------------------------------------------------
@dataclass
class Measured:
    """What one cell's job did."""

    ended: bool  # the launcher exited before CELL_TIMEOUT_S
    rc: int | None  # its exit status (None: killed at the timeout)
    wall_s: float  # from the launch until the last rank was gone
    after_fault_s: float | None  # from the fault until the last rank was gone
    injected: bool  # the victim said it injected the fault
    cause_printed: bool
    cause_first: bool  # the cause's line is the job's first error line
    done_ranks: int  # ranks that printed "done" (a healthy end)
    ranks_left: int  # processes of the job still there after the launcher exited
    aborted: bool  # an MPI_Abort was reported (Open MPI's banner, MPICH's "Abort(N)" line)
    error_lines: int  # lines that say what failed (ERROR_LINE)
    first_error: str  # the job's first error line (trimmed)
    output: str = field(default="", repr=False)
    left: list = field(default_factory=list)  # what outlived the launcher (pid [state] cmd)


#: the lines a user reads as "what failed" (an exception's own line, ours, the launchers')
ERROR_LINE = re.compile(
    r"mdloader: error:|^\s*[\w.]*(Error|Exception|Exit|Interrupt): |MPI_ABORT was invoked|"
    r"BAD TERMINATION|noticed that process rank|EXIT STRING|exited on signal|"
    r"MPI_ERRORS_ARE_FATAL|^Abort\(\d+\)")


ABORTED = re.compile(r"MPI_ABORT was invoked|^Abort\(\d+\)", re.M)


def cause_pattern(cell: Cell) -> re.Pattern:
    """The line that names the cause: the injected exception's, numpy's MemoryError, or a line
    naming the dead/stopped rank."""
    if cell.kind == "memory":
        return re.compile(r"Unable to allocate 1\.00 EiB")
    if cell.kind in EXCEPTIONS:
        return re.compile(rf"fault-matrix injected {cell.kind} on rank {cell.victim}")
    # MPICH's hydra names no rank: "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed
    # (signal 9)"
    hydra = r"|EXIT STRING: Killed \(signal 9\)" if cell.kind == "kill" else ""
    return re.compile(rf"rank {cell.victim} gave no sign of life|"
                      rf"process rank {cell.victim} .*(signal|exited){hydra}")


def run_cells(cells: list[Cell], data: Path, cluster=None) -> dict[str, Measured]:
    """Run `cells` (at most :data:`PARALLEL` at once; on `cluster` if given) -> id: measured."""
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        done = pool.map(lambda c: (c.id, run_cell(c, data, cluster)), cells)
        return dict(done)


def run_cell(cell: Cell, data: Path, cluster=None) -> Measured:
    mark = f"{os.getpid()}-{next(_seq)}-{cell.id}"
    extra = {**cell.env(), "FAULT_CELL_ID": mark}
    if cluster is not None:
        argv = cluster.mpiexec_argv(RANKS, cell.family)
        argv = argv[:1] + cell.launcher_flags() + argv[1:]
        env = cluster.env({**extra, "PYTHONUNBUFFERED": "1"}, cell.family)
    else:
        argv = [launcher(cell.family), *cell.launcher_flags(), "-n", str(RANKS)]
        env = mpi_env(extra, cell.family)
    t0 = time.time()
    proc = subprocess.Popen(argv + cell.argv(data), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
                            start_new_session=True)
    lines: list[str] = []
    injected = threading.Event()

    def read():
        for line in proc.stdout:
            lines.append(line)
            if "injects" in line and line.startswith("fault-matrix:"):
                injected.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    rc = None
    while rc is None:
        limit = (CELL_TIMEOUT_S if injected.is_set() else START_TIMEOUT_S)
        try:
            rc = proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            t_fault = _fault_time(cell, "".join(lines))
            if time.time() - (t_fault or t0) > limit:
                break
    ended = rc is not None
    if not ended:
        _kill(proc, mark)
        proc.wait()
    t_launcher = time.time()
    left = _wait_gone(mark, 10.0)
    t_gone = time.time() if not left else t_launcher
    left_cmds = [_cmdline(p) for p in left]
    if left:
        _kill(proc, mark)
    reader.join(10)
    m = measure(cell, "".join(lines), ended, rc, t0, t_gone, len(left))
    m.left = left_cmds
    return m


def _fault_time(cell: Cell, out: str) -> float | None:
    m = re.search(rf"fault-matrix: rank {cell.victim} injects \S+ at \S+ t=([\d.]+)", out)
    return float(m.group(1)) if m else None


def measure(cell: Cell, out: str, ended: bool, rc, t0: float, t_gone: float,
            left: int) -> Measured:
    t_fault = _fault_time(cell, out)
    cause = cause_pattern(cell)
    lines = out.splitlines()
    errors = [ln for ln in lines if ERROR_LINE.search(ln) or cause.search(ln)]
    first = errors[0].strip()[:300] if errors else ""
    return Measured(
        ended=ended, rc=rc, wall_s=round(t_gone - t0, 2),
        after_fault_s=None if t_fault is None else round(t_gone - t_fault, 2),
        injected=t_fault is not None, cause_printed=any(cause.search(ln) for ln in lines),
        cause_first=bool(errors) and bool(cause.search(errors[0])),
        done_ranks=sum(f"fault-matrix: rank {r} done" in out for r in range(RANKS)),
        ranks_left=left, aborted=bool(ABORTED.search(out)), error_lines=len(errors),
        first_error=first, output=out)


def _pids_marked(mark: str) -> list[int]:
    pids, needle = [], f"FAULT_CELL_ID={mark}\0".encode()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if needle in (d / "environ").read_bytes():
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


def _wait_gone(mark: str, limit: float) -> list[int]:
    """Wait until no process carries `mark` (at most `limit` s); the pids left."""
    end = time.time() + limit
    while True:
        pids = [p for p in _pids_marked(mark) if not _zombie(p)]
        if not pids or time.time() > end:
            return pids
        time.sleep(0.05)


def _cmdline(pid: int) -> str:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        return f"{pid} [{state}] {cmd.strip()[:200]}"
    except (OSError, IndexError):
        return f"{pid} (gone)"


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _kill(proc: subprocess.Popen, mark: str) -> None:
    """End the launcher's session and every process of the job (stopped ones included)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for pid in _pids_marked(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# -- targets ------------------------------------------------------------------------------------
def verdict(cell: Cell, m: Measured) -> tuple[bool, str]:
    """(met, why not) of `m` against the cell's target (module doc), from the measured numbers."""
    if not m.injected:
        return False, "the fault was never injected"
    if cell.kind == "stall":
        ok = m.ended and m.rc == 0 and m.done_ranks == RANKS and not m.aborted
        return ok, "" if ok else f"a healthy stall was aborted (exit {m.rc})"
    if not m.ended:
        return False, f"still running {CELL_TIMEOUT_S:g} s after the fault (killed)"
    if m.ranks_left:
        return False, (f"{m.ranks_left} rank process(es) still there 10 s after the launcher "
                       "exited (killed by the test)")
    if m.done_ranks == RANKS:
        return False, "the job ran to its end instead of stopping"
    if not m.cause_printed:
        named = f" (first error line: {m.first_error[:100]})" if m.first_error else ""
        return False, f"the cause's line was never printed{named}"
    if m.rc == 0 and not m.aborted:
        return False, "the job ended with exit 0"
    if cell.kind in EXCEPTIONS:
        if not m.cause_first:
            return False, f"another error line came first: {m.first_error[:120]}"
        if m.after_fault_s > EXCEPTION_S:
            return False, f"ended {m.after_fault_s:g} s after the fault"
        return True, ""
    limit = cell.timeout_s + BEAT_S
    if m.after_fault_s > limit:
        return False, f"ended {m.after_fault_s:g} s after the fault (target {limit:g} s)"
    return True, ""


def record(cell: Cell, m: Measured) -> dict:
    """One cell's entry of the JSON."""
    met, why = verdict(cell, m)
    d = {"id": cell.id, **asdict(cell), "victim": cell.victim, "ranks": RANKS,
         "fetch_timeout_s": cell.timeout_s, "target": cell.target,
         "launcher_flags": cell.launcher_flags(), "sync": cell.sync,
         **{k: v for k, v in asdict(m).items() if k != "output"},
         "output_tail": _tail(m.output),
         "met": met, "missed_because": why,
         "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return d


def _tail(out: str, keep: int = 12) -> list[str]:
    """The job's last lines that say something (not the loader's load and memory lines, not
    the launchers' banner rules), for reading a missed cell in the JSON."""
    skip = re.compile(r"^mdloader: (loaded|\[train\] memory)|^[-=]{10,}\s*$|^\s*$")
    return [ln.replace("\0", "")[:300] for ln in out.splitlines()
            if not skip.search(ln.replace("\0", ""))][-keep:]


def write_json(path: Path, records: list[dict], commit: str | None = None) -> None:
    """Merge `records` into `path` by cell id (other cells kept; cells no longer in the matrix
    dropped), in the matrix's order."""
    old = {}
    if path.exists():
        old = {c["id"]: c for c in json.loads(path.read_text()).get("cells", [])}
    old.update({r["id"]: r for r in records})
    order = [c.id for c in one_host_cells() + cluster_cells()]
    cells = [old[i] for i in order if i in old]
    doc = {"about": "tests/integration/test_fault_matrix.py (tests/common/fault_matrix.py): "
                    "one cell a fault; the table in docs/reliability.md is made from this file",
           "commit": commit or _commit(), "cells": cells}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)


def _commit() -> str:
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                       cwd=ROOT)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no",
                            "mdloader_plugin"], capture_output=True, text=True, cwd=ROOT).stdout
    return r.stdout.strip() + ("+dirty" if dirty.strip() else "")
