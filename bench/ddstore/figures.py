"""RESULTS.md's DDStore 954ef59 section and the figures the docs quote from
``bench/results/ddstore_batched.json`` (``python -m bench.ddstore.batched``); merged into
``figures.FIGURES`` under ``ddstore954.*``.

A cell is (data set, hosts, ranks, batch). Its two targets, judged on paired rounds (the median
over rounds of one loader's round median over the other's, same steps, seconds apart):
``auto`` at or below the best DDStore method (the DDStore loader with the lowest median), and
MDLoader's ``collective`` at or below DDStore's collective ``get_batch`` (the better layout of
``dds_coll_pad`` and ``dds_coll_rows``)."""

from __future__ import annotations

import json
import statistics
from typing import Callable

from bench.harness import RESULTS
FILE = "ddstore_batched.json"
ORDER = ("mdl_onesided", "mdl_collective", "mdl_auto", "dds_coll_pad", "dds_coll_rows",
         "dds_fabric_pad", "dds_fabric_rows")
NAMES = {"hydragnn": "molecules", "oc20": "OC20-like"}


def _load() -> dict:
    return json.loads((RESULTS / FILE).read_text())


def paired(a: dict, b: dict) -> float:
    """Median over rounds of a's round median over b's."""
    return statistics.median(x / y for x, y in zip(a["round_medians_ms"], b["round_medians_ms"]))


def cells(data: dict | None = None) -> list[dict]:
    """One dict a cell: its rows by loader, the best DDStore row, the two paired ratios."""
    data = data or _load()
    by: dict[tuple, dict] = {}
    for r in data["rows"]:
        by.setdefault((r["dataset"], r["hosts"], r["ranks"], r["batch"]), {})[r["loader"]] = r
    out = []
    for key in sorted(by, key=lambda k: (k[0], k[1], k[2], k[3])):
        rows = by[key]
        dds = [rows[n] for n in ORDER[3:] if n in rows]
        coll = [rows[n] for n in ("dds_coll_pad", "dds_coll_rows") if n in rows]
        if not dds or "mdl_auto" not in rows:
            continue
        best = min(dds, key=lambda r: r["fetch_ms_median"])
        best_coll = min(coll, key=lambda r: r["fetch_ms_median"]) if coll else None
        out.append({"key": key, "rows": rows, "best": best, "best_coll": best_coll,
                    "heldout": bool(rows["mdl_auto"].get("heldout")),
                    "auto_ratio": paired(rows["mdl_auto"], best),
                    "coll_ratio": (paired(rows["mdl_collective"], best_coll)
                                   if best_coll and "mdl_collective" in rows else None)})
    return out


def table(data: dict) -> list[str]:
    """RESULTS.md: fetch median (p95) of every loader a cell, the paired ratios, the checks."""
    runs = data.get("runs", [])
    out = [f"DDStore 954ef59 (pyddstore 2.0, `get_batch`): method 0 `coll` (Allgather + "
           "Allgatherv of the indices, Alltoallv of the rows), method 1 `fabric` (libfabric "
           "`fi_read`s posted together; `FABRIC_IFACE=lo` on one host, the emulated link "
           "`eth0` across hosts: a software tcp provider, not RDMA). Layouts: `_pad` one row a "
           "record padded to the widest, `_rows` records cut into rows of `row_bytes` "
           "(`bench/ddstore/layouts.py`; HydraGNN main's own `DistDataset` reads 1-byte rows "
           "with one `get` a sample, never `get_batch`). Fetch only, same plans, paired rounds; "
           "ms, median (p95) of the slowest rank a step. `auto/best` and `coll/coll`: median over "
           "rounds of the paired ratio (<= 1: MDLoader at or below).", ""]
    for run in runs:
        p = run.get("parameters", {})
        out.append(f"Run {run['date']} on {run.get('host', '?')} ({run.get('cores')} cores, "
                   f"load {run['loadavg_start'][0]:.1f} at start, "
                   f"{run.get('loadavg_end', ['?'])[0]} at end), {run.get('mpi', '')}, commit "
                   f"{run.get('commit', '?')}; {p.get('rounds')} rounds x {p.get('steps')} steps"
                   f"{', cluster ' + p['cluster'] if p.get('cluster') else ''}.")
    out += ["", "| data | hosts x ranks | batch | " + " | ".join(ORDER) +
            " | auto/best | coll/coll | bytes pad/rows/mdl | checked (bad) |",
            "|---|---|---|" + "---|" * len(ORDER) + "---|---|---|---|"]
    for c in cells(data):
        ds, hosts, ranks, b = c["key"]
        rows = c["rows"]
        vals = [f"{rows[n]['fetch_ms_median']:.3g} ({rows[n]['fetch_ms_p95']:.3g})"
                if n in rows else "–" for n in ORDER]
        cr = "–" if c["coll_ratio"] is None else f"{c['coll_ratio']:.2f}"
        moved = "/".join(f"{rows[n]['bytes_moved'] / 1024:.0f}" if n in rows else "–"
                         for n in ("dds_coll_pad", "dds_coll_rows", "mdl_collective"))
        checked = sum(r["records_checked"] for r in rows.values())
        bad = sum(r["mismatches"] for r in rows.values())
        held = " (held out)" if c["heldout"] else ""
        out.append(f"| {NAMES.get(ds, ds)} | {hosts} x {ranks // hosts} | {b}{held} | "
                   + " | ".join(vals) + f" | {c['auto_ratio']:.2f} | {cr} | {moved} KiB | "
                   f"{checked} ({bad}) |")
    out += ["", f"Targets met: auto at or below the best DDStore method in {auto_met()} cells; "
            f"collective at or below DDStore's collective get_batch in {coll_met()} cells "
            "(development grid and held-out cells together; held-out alone: auto "
            f"{auto_met(True)}, collective {coll_met(True)})."]
    return out


def _count(field: str, heldout: bool | None) -> str:
    c = [x for x in cells() if x[field] is not None and (heldout is None or x["heldout"])]
    return f"{sum(x[field] <= 1 for x in c)} of {len(c)}"


def auto_met(heldout: bool | None = None) -> str:
    return _count("auto_ratio", heldout)


def coll_met(heldout: bool | None = None) -> str:
    return _count("coll_ratio", heldout)


def _span(field: str, cond=lambda c: True) -> str:
    r = [c[field] for c in cells() if c[field] is not None and cond(c)]
    lo, hi = format(min(r), ".2f"), format(max(r), ".2f")
    return f"{lo}x" if lo == hi else f"{lo}–{hi}x"


def _ab(ranks: int = 2, batch: int = 4) -> dict:
    """``bench/ddstore/collective_ab.py``'s step-interleaved A/B (molecules) at `ranks`, `batch`."""
    d = json.loads((RESULTS / f"ddstore_coll_ab_n{ranks}.json").read_text())
    return {**d, "by": {r["variant"]: r for r in d["rows"] if r["batch"] == batch}}


def _over_dds(row: dict, built: bool = False) -> float:
    """A variant's median per-step ratio over the better DDStore collective layout (``built``:
    DDStore's loop making a batch between fetches too)."""
    end = "_built" if built else ""
    return max(row[f"over_dds_coll_pad{end}"], row[f"over_dds_coll_rows{end}"])


def ab_ranks() -> str:
    """At 2, 3 and 4 ranks, batches 4 and 32, like for like: the backend called directly over
    DDStore fetching back to back, then the loader (which builds each batch) over DDStore's loop
    building the same batches (median of per-step ratios, the better DDStore layout)."""
    out = []
    for n in (2, 3, 4):
        for b in (4, 32):
            by = _ab(n, b)["by"]
            out.append(f"{n} ranks b{b}: {_over_dds(by['mdl_collective']):.2f}x / "
                       f"{_over_dds(by['mdl_loader'], True):.2f}x")
    return "; ".join(out)


def ab_built() -> str:
    """What a batch built between fetches does to the next fetch, 4 ranks b4: the backend's
    fetch with a build between over without, and DDStore's (rows)."""
    by = _ab(4, 4)["by"]
    return (f"MDLoader's collective {by['mdl_collective_built']['median_ms'] * 1e3:.0f} against "
            f"{by['mdl_collective']['median_ms'] * 1e3:.0f} µs, through the loader "
            f"{by['mdl_loader']['median_ms'] * 1e3:.0f} µs; DDStore rows "
            f"{by['dds_coll_rows_built']['median_ms'] * 1e3:.0f} against "
            f"{by['dds_coll_rows']['median_ms'] * 1e3:.0f} µs")


def ab_loads() -> str:
    """The load averages the A/B runs saw (start-end), the dates."""
    runs = [_ab(n) for n in (2, 3, 4)]
    lo = min(min(r["loadavg_start"], r["loadavg_end"]) for r in runs)
    hi = max(max(r["loadavg_start"], r["loadavg_end"]) for r in runs)
    return f"{runs[0]['date']}, load {lo:.1f}–{hi:.1f} on 2 cores"


def ab_p10() -> str:
    """p10 fetch of the variants (steps no rank was descheduled in)."""
    by = _ab()["by"]
    return ", ".join(f"{n} {by[n]['p10_ms'] * 1e3:.0f} µs" for n in
                     ("mdl_collective", "mdl_collective_built", "mdl_loader",
                      "mdl_collective_numpy", "dds_coll_rows", "dds_coll_rows_built") if n in by)


def ab_ratio() -> str:
    """Median per-step ratio of MDLoader's collective (small-step path) over each layout."""
    r = _ab()["by"]["mdl_collective"]
    return f"{r['over_dds_coll_pad']:.2f}x / {r['over_dds_coll_rows']:.2f}x"


def ab_when() -> str:
    d = _ab()
    return f"{d['date']}, load {d['loadavg_start']:.0f}–{d['loadavg_end']:.0f} on 2 cores"


def misses(field: str) -> str:
    """The cells a target misses: data set, hosts x ranks a host, batch (paired ratio)."""
    c = [x for x in cells() if x[field] is not None and x[field] > 1]
    return "; ".join(f"{NAMES.get(x['key'][0], x['key'][0])} {x['key'][1]}x"
                     f"{x['key'][2] // x['key'][1]} b{x['key'][3]} ({x[field]:.2f})"
                     for x in c) or "none"


FIGURES_DDSTORE954: dict[str, Callable[[], str]] = {
    "ddstore954.auto_misses": lambda: misses("auto_ratio"),
    "ddstore954.coll_misses": lambda: misses("coll_ratio"),
    "ddstore954.ab_p10": ab_p10,
    "ddstore954.ab_ratio": ab_ratio,
    "ddstore954.ab_when": ab_when,
    "ddstore954.ab_ranks": ab_ranks,
    "ddstore954.ab_built": ab_built,
    "ddstore954.ab_loads": ab_loads,
    "ddstore954.date": lambda: _load()["date"][:10],
    "ddstore954.auto_met": auto_met,
    "ddstore954.coll_met": coll_met,
    "ddstore954.auto_ratio": lambda: _span("auto_ratio"),
    "ddstore954.coll_ratio": lambda: _span("coll_ratio"),
    "ddstore954.coll_ratio_b4": lambda: _span("coll_ratio", lambda c: c["key"][3] == 4),
    "ddstore954.checked": lambda: f"{sum(r['records_checked'] for r in _load()['rows']):,}",
    "ddstore954.bad": lambda: str(sum(r["mismatches"] for r in _load()["rows"])),
}
