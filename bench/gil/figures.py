"""The figures pages quote about the GIL-free producer and the producer's CPU a step (``FIGURES``:
key -> function; merged into ``bench.figures.FIGURES``)."""

from __future__ import annotations

from typing import Callable

from bench.reporting import load as _load, span as _range


def producer_cpu_after() -> str:
    """The producer's CPU time a step after the A/B's change, over its cases."""
    ms = [m["after"] for m in _load("producer_cost_ab.json")["median_ms"].values()]
    return _range(min(ms), max(ms), ".1f", " ms")


def producer_ab_table() -> str:
    """``bench/gil/producer_cost.py --before``'s A/B: CPU ms a step before and after, each
    round, and the samples/s one rank's loader sustains on a free core after."""
    d = _load("producer_cost_ab.json")
    runs = d["runs"]  # {tree: [{case: ms} a round]}
    out = ["| case (data:batch) | before, ms | after, ms | change | rounds before | rounds after | "
           "after: samples/s one rank's loader sustains on one free core |",
           "|---|---:|---:|---:|---|---|---:|"]
    for case, m in d["median_ms"].items():
        rounds = {t: ", ".join(f"{r[case]:.2f}" for r in runs[t]) for t in runs}
        rate = int(case.split(":")[1]) / (m["after"] / 1000)
        out.append(f"| {case} | {m['before']:.2f} | {m['after']:.2f} | "
                   f"{m['after'] / m['before'] - 1:+.0%} | {rounds['before']} | {rounds['after']} "
                   f"| {round(rate, -2):,.0f} |")
    return "\n\n" + "\n".join(out) + "\n\n"


GIL_CASES = (("hydragnn", 32), ("hydragnn", 128), ("oc20", 8), ("oc20", 32))


def _gil_rows(name: str, ranks: int, ms: float) -> list[dict]:
    rows = {(r["dataset"], r["batch"]): r for r in _load(name)["rows"]
            if (r["ranks"], r["loader"], r["step_ms"]) == (ranks, "onesided", ms)}
    return [rows[c] for c in GIL_CASES]


def _gil_waits(name: str, ranks: int, ms: float) -> str:
    return " / ".join(f"{100 * r['wait_share_max']:.1f}" for r in _gil_rows(name, ranks, ms)) + " %"


def _gil_pace(name: str, ms: float) -> str:
    d = _load(name)
    alone = d["trainer_alone_ms"][f"{ms:g}"]
    pace = [100 * r["samples_per_s"] * alone / 1e3 / r["batch"] for r in _gil_rows(name, 1, ms)]
    return _range(min(pace), max(pace), ".0f", "%")


def gil_held_ms() -> str:
    d = _load("producer_cost.json")["cases"]
    return " / ".join(f"{d[f'{ds}:{b}']['auto']['gil_held_ms']:.3f}" for ds, b in GIL_CASES) + " ms"


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def _gil_wait_met(ms: float, target: float) -> str:
    return _verdict(all(100 * r["wait_share_max"] <= target
                        for r in _gil_rows("gpu_rate_gilfree.json", 1, ms)))


def gil_held_met() -> str:
    d = _load("producer_cost.json")["cases"]
    return _verdict(all(d[f"{ds}:{b}"]["auto"]["gil_held_ms"] <= 0.25 for ds, b in GIL_CASES))


FIGURES_GIL = {
    "gil.held_met": gil_held_met,
    "gil.wait_1ms_met": lambda: _gil_wait_met(1.0, 2.0),
    "gil.wait_2ms_met": lambda: _gil_wait_met(2.0, 1.0),
    "gil.waits_met": lambda: ("**met**" if _gil_wait_met(1.0, 2.0) == _gil_wait_met(2.0, 1.0)
                              == "**met**" else "**missed**"),
    "gil.date": lambda: _load("gpu_rate_gilfree.json")["machine"]["date"],
    "gil.load": lambda: str(_load("gpu_rate_gilfree.json")["machine"]["loadavg_start"][0]),
    "gil.held_ms": gil_held_ms,
    "gil.wait_1ms": lambda: _gil_waits("gpu_rate_gilfree.json", 1, 1.0),
    "gil.wait_2ms": lambda: _gil_waits("gpu_rate_gilfree.json", 1, 2.0),
    "gil.wait_2ranks_1ms": lambda: _gil_waits("gpu_rate_gilfree.json", 2, 1.0),
    "gil.wait_2ranks_2ms": lambda: _gil_waits("gpu_rate_gilfree.json", 2, 2.0),
    "gil.queue_wait_1ms": lambda: _gil_waits("gpu_rate_gilfree_queue.json", 1, 1.0),
    "gil.queue_wait_2ms": lambda: _gil_waits("gpu_rate_gilfree_queue.json", 1, 2.0),
    "gil.pace_1ms": lambda: _gil_pace("gpu_rate_gilfree.json", 1.0),
    "gil.pace_2ms": lambda: _gil_pace("gpu_rate_gilfree.json", 2.0),
    "gil.numpy_pace_1ms": lambda: _gil_pace("gpu_rate_gilfree_numpy.json", 1.0),
}


FIGURES: dict[str, Callable[[], str]] = {
    "producer.ab_table": producer_ab_table,
    "producer.cpu_after": producer_cpu_after,
}
FIGURES.update(FIGURES_GIL)
