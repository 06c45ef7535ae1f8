"""The figures pages quote about replica groups on the emulated cluster (``FIGURES``: key ->
function; merged into ``bench.figures.FIGURES``)."""

from __future__ import annotations

from typing import Callable

from bench.groups import score as groups_bench
from bench.reporting import load as _load, of as _of, span as _range


def _gsum(name: str) -> dict:
    return groups_bench.summary(_load(name)["runs"])


def _tie_aware(name: str) -> str:
    s = _gsum(name)
    return f"{_of(s['tie_aware_right'], s['configs'])} ({s['tie_aware_right'] / s['configs']:.0%})"


def groups_dev_tie_aware() -> str:
    return _tie_aware("groups.json")


def groups_dev_strict() -> str:
    s = _gsum("groups.json")
    return _of(s["strict_right"], s["configs"])


def groups_heldout_tie_aware() -> str:
    return _tie_aware("groups_heldout.json")


def groups_heldout_strict() -> str:
    s = _gsum("groups_heldout.json")
    return _of(s["strict_right"], s["configs"])


def groups_grids_table() -> str:
    """Both grids' scores: strictly, tie-aware, within 10%, by the fetch alone."""
    out = ["| grid | configurations | strictly right | tie-aware right | within 10% | by the "
           "fetch alone (tie-aware) |", "|---|---|---|---|---|---|"]
    for name, label in (("groups.json", "development (2x2, 4x1 @ 200mbit, 1gbit; the "
                         "estimator was developed on it)"),
                        ("groups_heldout.json", "held out (3x2 @ 300mbit, 4x1 @ 500mbit; never "
                         "tuned on)")):
        s = _gsum(name)
        n = s["configs"]
        out.append(f"| {label} | {n} | {s['strict_right']} ({s['strict_right'] / n:.0%}) | "
                   f"**{s['tie_aware_right']} ({s['tie_aware_right'] / n:.0%})** | "
                   f"{s['tolerance_right']} | {s['fetch_tie_aware_right']} |")
    return "\n\n" + "\n".join(out) + "\n\n"


def _host_local(name: str, rate: str | None, kind: str, min_batch: int = 32) -> list[float]:
    """Best W = P step over the best host-local (W = ranks a host) step, per run."""
    out = []
    for run in _load(name)["runs"]:
        if (rate and run["rate"] != rate) or run["kind"] != kind or run["batch"] < min_batch:
            continue
        med = groups_bench._medians(run["rows"])
        full = max(w for w, _ in med)
        rph = int(run["shape"].split("x")[1])
        at_p = min(v for (w, _), v in med.items() if w == full)
        local = [v for (w, _), v in med.items() if w == rph]
        if local:
            out.append(at_p / min(local))
    return out


def groups_oc20_200mbit() -> str:
    r = _host_local("groups.json", "200mbit", "oc20")
    return _range(min(r), max(r), ".1f", "x")


def groups_oc20_1gbit() -> str:
    r = _host_local("groups.json", "1gbit", "oc20")
    return _range(min(r), max(r), ".1f", "x")


def groups_oc20_heldout() -> str:
    r = _host_local("groups_heldout.json", None, "oc20")
    return _range(min(r), max(r), ".1f", "x")


def groups_when() -> str:
    d = sorted(r["date"] for r in _load("groups.json")["runs"])
    return d[-1][:10]


FIGURES: dict[str, Callable[[], str]] = {
    "groups.dev_tie_aware": groups_dev_tie_aware,
    "groups.dev_strict": groups_dev_strict,
    "groups.heldout_tie_aware": groups_heldout_tie_aware,
    "groups.heldout_strict": groups_heldout_strict,
    "groups.oc20_200mbit": groups_oc20_200mbit,
    "groups.oc20_1gbit": groups_oc20_1gbit,
    "groups.oc20_heldout": groups_oc20_heldout,
    "groups.date": groups_when,
    "groups.grids_table": groups_grids_table,
}
