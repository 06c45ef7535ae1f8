"""The figures docs/rank-cost.md quotes, from bench/results/rank_cost.json and
rank_cost_small.json (``python -m bench.estimator.rank_cost`` and ``--small-only``); merged into
``figures.FIGURES`` under ``rank_cost.*``."""

from __future__ import annotations

import json
import statistics
from typing import Callable

from bench.harness import RESULTS
TARGET = 1.25  # the target: CPU a step at P = 8,192 over P = 64


def _load(name: str = "rank_cost.json") -> dict:
    return json.loads((RESULTS / name).read_text())


def paired_ratio(a: dict, b: dict) -> float:
    """Median over rounds of a's over b's median step CPU in the same round (run seconds
    apart: a load that lasts a round falls on both; one that lasts a run is outvoted)."""
    return statistics.median(x / y for x, y in zip(a["rounds_ms"], b["rounds_ms"]))


def _row(rows, backend, weights, datasets, code, p):
    return next(r for r in rows if (r["backend"], r["weights"], r["datasets"], r["code"],
                                    r["ranks"]) == (backend, weights, datasets, code, p))


def _configs(rows):
    seen = []
    for r in rows:
        key = (r["backend"], r["weights"], r["datasets"])
        if key not in seen:
            seen.append(key)
    return seen


def _block(lines: list[str]) -> str:
    """A table as a page quotes it: its marker alone on a line, blank lines around it."""
    return "\n\n" + "\n".join(lines) + "\n\n"


def when() -> str:
    m = _load()["meta"]
    return (f"{m['date']}, {m['machine']}; a point is the fastest of {m.get('rounds', 1)} rounds' "
            f"median of {m['steps']} steps")


def table() -> str:
    """CPU a step against P, today's code and the code before, with 8,192 / 64."""
    rows = _load()["rows"]
    ranks = sorted({r["ranks"] for r in rows})
    out = ["| backend | weights | data sets | code | " +
           " | ".join(f"P={p:,}" for p in ranks) + " | 8,192 / 64 |",
           "|---|---|---:|---|" + "---:|" * (len(ranks) + 1)]
    for backend, weights, datasets in _configs(rows):
        for code in ("new", "legacy"):
            pts = [_row(rows, backend, weights, datasets, code, p) for p in ranks]
            ms = [r["step_cpu_ms_median"] for r in pts]
            ratio = paired_ratio(pts[-1], pts[0])
            cell = f"{ratio:.2f}" if code == "legacy" else \
                f"**{ratio:.2f}**" if ratio <= TARGET else f"**{ratio:.2f} (miss)**"
            out.append(f"| {backend} | {'atoms' if weights else '-'} | {datasets} | {code} | " +
                       " | ".join(f"{x:.2f}" for x in ms) + f" | {cell} |")
    return _block(out)


def legacy_8192() -> str:
    """CPU a step of the code before at P = 8,192 (the whole table a step), over the grid."""
    ms = [r["step_cpu_ms_median"] for r in _load()["rows"]
          if r["code"] == "legacy" and r["ranks"] == 8192]
    return f"{min(ms):.0f}–{max(ms):.0f} ms"


def _ratios() -> list[tuple[str, float]]:
    """(configuration, 8,192 / 64) of every configuration the targets name."""
    return [(k, v["ratio"]) for k, v in _load()["targets"].items() if "ratio" in v]


def targets_met() -> str:
    r = _ratios()
    met = [x for _, x in r if x <= TARGET]
    word = f"met for all {len(r)} configurations" if len(met) == len(r) else \
        f"met for {len(met)} of {len(r)} configurations, missed for " + ", ".join(
            f"{k} ({x:.2f}x)" for k, x in r if x > TARGET)
    return f"**{word}** ({ratio_range()})"


def ratio_range() -> str:
    r = [x for _, x in _ratios()]
    return f"{min(r):.2f}–{max(r):.2f}x"


def met() -> str:
    return "**met**" if all(x <= TARGET for _, x in _ratios()) else "**missed**"


def epoch_start() -> str:
    big = {b["datasets"]: b for b in _load()["big"]}
    return (f"{big[1]['epoch_start_s']:.3f} s (one data set) and "
            f"{big[15]['epoch_start_s']:.3f} s (15 data sets)")


def bytes_per_sample() -> str:
    return f"{max(b['bytes_per_sample'] for b in _load()['big']):.2f} B"


def balance() -> str:
    rows = _load()["balance"]
    out = ["| P | unbalanced | blocks (default) | whole windows | whole world |",
           "|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['ranks']} | {r['unbalanced']:.3f} | **{r['blocks']:.3f}** | "
                   f"{r['windows']:.3f} | {r['world']:.3f} |")
    return _block(out)


def heldout() -> str:
    rows = _load()["heldout"]
    out = ["| backend | b | N | P=64 | P=8,192 | 8,192 / 64 |", "|---|---:|---:|---:|---:|---:|"]
    for backend in ("onesided", "collective"):
        for b in sorted({r["batch_size"] for r in rows}):
            sel = {r["ranks"]: r for r in rows if r["backend"] == backend and
                   r["batch_size"] == b}
            lo, hi = sel[64]["step_cpu_ms_median"], sel[8192]["step_cpu_ms_median"]
            ratio = paired_ratio(sel[8192], sel[64])
            mark = "" if ratio <= TARGET else " (miss)"
            out.append(f"| {backend} | {b} | {sel[64]['num_samples']:.0e} | {lo:.2f} | "
                       f"{hi:.2f} | {ratio:.2f}{mark} |")
    return _block(out)


def small_ab() -> str:
    r = [row["new_over_legacy"] for row in _load("rank_cost_small.json")["rows"]]
    return f"{min(r):.2f}–{max(r):.2f}"


GROWS = {"index": "N (and P + 1 starts)", "order": "–", "plan: plan_rows": "–",
         "plan: inverse": "N / P", "alltoallv": "P", "node": "P", "records": "N / P"}


def _size(n: int) -> str:
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("KiB", 1024)):
        if n >= k:
            return f"{n / k:,.1f} {unit}" if unit != "KiB" else f"{n / k:,.0f} {unit}"
    return f"{n} B"


def structures() -> str:
    """Every per-rank structure that grows with N or P, at N = 10^9, P = 8,192, 15 data sets."""
    big = next(b for b in _load()["big"] if b["datasets"] == 15)["structures"]
    out = ["| structure (`memory_report()` name) | grows with | bytes a rank |", "|---|---|---:|"]
    for k, v in big.items():
        if k in ("N", "P"):
            continue
        grows = next(g for prefix, g in GROWS.items() if k.startswith(prefix))
        out.append(f"| {k} | {grows} | {_size(v)} |")
    return _block(out)


FIGURES_RANK_COST: dict[str, Callable[[], str]] = {
    "rank_cost.when": when,
    "rank_cost.table": table,
    "rank_cost.legacy_8192": legacy_8192,
    "rank_cost.targets_met": targets_met,
    "rank_cost.ratio_range": ratio_range,
    "rank_cost.met": met,
    "rank_cost.date": lambda: _load()["meta"]["date"],
    "rank_cost.epoch_start": epoch_start,
    "rank_cost.bytes_per_sample": bytes_per_sample,
    "rank_cost.balance": balance,
    "rank_cost.heldout": heldout,
    "rank_cost.small_ab": small_ab,
    "rank_cost.structures": structures,
}
