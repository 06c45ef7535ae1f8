"""The figures pages quote about the fixed per-step fetch cost, several data sets in one store, and
progress under MPICH (``FIGURES``: key -> function; merged into ``bench.figures.FIGURES``)."""

from __future__ import annotations

from typing import Callable

from bench.loaders import tables as report_tables
from bench.loaders.figures import _by
from bench.reporting import load as _load, of as _of, span as _range


def multi_within() -> str:
    r = [(b["ratio"] - 1) * 100 for b in _load("multi.json")["backends"].values()]
    return _range(min(r), max(r), ".0f", "%")


def _fetch_cells() -> list[tuple[float, float]]:
    """(auto fetch / real DDStore fetch, auto fetch / floor) per cell of the latest round."""
    keys, by = _by("fetch_cost.json")
    out = []
    for k in keys:
        a, dd = by.get((*k, "auto")), by.get((*k, "ddstore-real"))
        if a and dd:
            out.append((a["fetch_median_s"] / dd["fetch_median_s"],
                        a["fetch_median_s"] / a["floor_s"]))
    return out


def fetch_below_ddstore() -> str:
    c = _fetch_cells()
    return _of(sum(r <= 1 for r, _ in c), len(c))


def fetch_over_ddstore_range() -> str:
    r = [x for x, _ in _fetch_cells()]
    return _range(min(r), max(r), ".2f", "x")


def fetch_floor_met() -> str:
    """Cells at batch >= 32 whose fetch is within 3x the memcpy floor, latest round."""
    keys, by = _by("fetch_cost.json")
    over = [by[(*k, "auto")]["fetch_median_s"] / by[(*k, "auto")]["floor_s"]
            for k in keys if k[2] >= 32 and (*k, "auto") in by]
    return _of(sum(x <= 3 for x in over), len(over))


def fetch_table() -> str:
    """The before/after fetch grid of RESULTS.md's fixed per-step cost section (its first
    table)."""
    lines = report_tables.fetch_cost_tables(
        _load("fetch_cost_before.json"), _load("fetch_cost.json"),
        (_load("fetch_profile_n2.json"), _load("fetch_profile_n4.json")),
        before_what="the tree before this round, b5124e3")
    start = next(i for i, x in enumerate(lines) if x.startswith("| data |"))
    stop = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return "\n\n" + "\n".join(lines[start:stop]) + "\n\n"


def multi_table() -> str:
    """Fetch with 3 data sets in one store against one file of the same size."""
    m = _load("multi.json")
    out = ["| backend | 3 data sets (ms) | one file (ms) | ratio |", "|---|---|---|---|"]
    for b, r in m["backends"].items():
        out.append(f"| {b} | {r['median_ms']['multi']:.3f} | {r['median_ms']['single']:.3f} | "
                   f"{r['ratio']:.2f} |")
    return "\n\n" + "\n".join(out) + "\n\n"


def async_progress_lines(d: dict) -> list[str]:
    """Fetch p50/p95 under MPICH across emulated hosts: MDLoader's poller, MPICH's async
    progress thread beside it, and MPICH's thread alone (bench/fetch/async_progress.py)."""
    out = ["| progress | backend | fetch p50 (ms) | fetch p95 (ms) | job wall (s) |",
           "|---|---|---:|---:|---:|"]
    names = {"poller": "MDLoader's poller (default)",
             "poller+mpich_async": "poller + `MPICH_ASYNC_PROGRESS=1`",
             "mpich_async": "`MPICH_ASYNC_PROGRESS=1` alone"}
    for r in d["rows"]:
        out.append(f"| {names[r['arm']]} | {r['backend']} | {r['p50_ms']:.1f} | "
                   f"{r['p95_ms']:.1f} | {r['job_wall_s']:.0f} |")
    return out


def async_progress_table() -> str:
    d = _load("async_progress.json")
    head = (f"MPICH wheel, {d['cluster']} emulated, batch {d['batch']}, a {d['compute_ms']:g} ms "
            f"trainer step outside MPI, {d['rounds']} interleaved rounds, {d['date']}, load "
            f"{d['load']:.0f} on 2 cores:")
    return "\n\n" + head + "\n\n" + "\n".join(async_progress_lines(d)) + "\n\n"


FIGURES: dict[str, Callable[[], str]] = {
    "multi.table": multi_table,
    "async_progress.table": async_progress_table,
    "fetch.table": fetch_table,
    "fetch.floor_met": fetch_floor_met,
    "multi.within": multi_within,
    "fetch.below_ddstore": fetch_below_ddstore,
    "fetch.over_ddstore": fetch_over_ddstore_range,
}
