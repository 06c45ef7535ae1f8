"""The fault matrix's table as docs/reliability.md quotes it, made from
``bench/results/faults.json`` (written by tests/integration/test_fault_matrix.py)."""

from __future__ import annotations

from typing import Callable

from bench.reporting import load

KIND = {"exception": "exception in the trainer", "backward": "exception in `loss.backward()`",
        "memory": "`MemoryError`", "producer": "exception in the producer thread",
        "watchdog": "exception in the watchdog thread", "kill": "SIGKILL", "stop": "SIGSTOP",
        "stall": "healthy stall of 3 T (an evaluation)"}
PHASE = {"load": "load", "first": "first step", "mid": "mid-epoch",
         "boundary": "epoch boundary", "close": "close"}
FAMILY = {"openmpi": "Open MPI", "mpich": "MPICH"}


def _cells() -> list[dict]:
    return load("faults.json")["cells"]


def _run_as(c: dict) -> str:
    parts = ["`python -m mpi4py`" if c["entry"] == "mpi4py" else "`python`",
             "`with`" if c["form"] == "with" else "no `with`"]
    if c["threads"] != "multiple":
        parts.append(f"MPI_THREAD_{c['threads'].upper()}")
    parts += [f"`{f}`" for f in c["launcher_flags"]]
    return ", ".join(parts)


def _seconds(c: dict) -> str:
    if c["after_fault_s"] is None:
        return "—"
    s = f"{c['after_fault_s']:.1f}"
    return s if c["ended"] else f"{s} (still running: killed)"


def _exit(c: dict) -> str:
    return "—" if c["rc"] is None else str(c["rc"])


def _cause(c: dict) -> str:
    if c["kind"] == "stall":
        return "—"
    if not c["cause_printed"]:
        return "not printed"
    return "first" if c["cause_first"] else "printed, not first"


def _met(c: dict) -> str:
    return "yes" if c["met"] else f"**no**: {_cell_text(c['missed_because'])}"


def _cell_text(text: str) -> str:
    """`text` safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def table() -> str:
    """One row a cell: fault, phase, backend, MPI, hosts, how it was run, T, exit, seconds from
    the fault until the last rank was gone, the cause's line, the target, met or missed."""
    lines = ["| fault | phase | backend | MPI | hosts | run as | T (s) | exit "
             "| s after the fault | cause's line | target | met? |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in _cells():
        lines.append(" | ".join([
            f"| {KIND[c['kind']]}", PHASE[c["phase"]], c["backend"], FAMILY[c["family"]],
            str(c["hosts"]), _run_as(c), f"{c['fetch_timeout_s']:g}", _exit(c), _seconds(c),
            _cause(c), c["target"], _met(c)]) + " |")
    return "\n\n" + "\n".join(lines) + "\n\n"


def summary() -> str:
    """``N of M cells met (commit C, dates)``."""
    cells, doc = _cells(), load("faults.json")
    days = sorted({c["utc"][:10] for c in cells})
    when = days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"
    return (f"{sum(c['met'] for c in cells)} of {len(cells)} cells met (measured {when} at "
            f"commit {doc['commit']})")


FIGURES: dict[str, Callable[[], str]] = {"faults.table": table, "faults.summary": summary}
