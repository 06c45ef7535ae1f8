"""The figures docs/fairchem.md quotes, from bench/results/fairchem_batches.json (``python
-m bench.fairchem.batches``); merged into ``figures.FIGURES`` under ``fairchem.*``."""

from __future__ import annotations

import json
from typing import Callable

from bench.harness import RESULTS


def _load() -> dict:
    return json.loads((RESULTS / "fairchem_batches.json").read_text())


def when() -> str:
    d = _load()
    return f"{d['date']}, {d['machine']}, {d['structures']:,} OC20-like structures"


def table() -> str:
    """Atoms a batch against max_atoms: batches in each tenth of the cap, the largest, the share
    above it (counted in the last tenth); fairchem's sampler, MDLoader, and the rule before
    (max_atoms // mean graphs a batch)."""
    lines = ["| max_atoms | batches of | " + " | ".join(f"≤{(k + 1) * 10}%" for k in range(10))
             + " | largest | above the cap | batches |",
             "|---:|---|" + "---:|" * 13]
    for r in _load()["batches"]:
        for name, key in (("fairchem's sampler", "fairchem"), ("MDLoader", "mdloader"),
                          (f"before ({r['before']['graphs_a_batch']} graphs)", "before")):
            s = r[key]
            if s is None:
                continue
            lines.append(f"| {r['max_atoms']} | {name} | " + " | ".join(map(str, s["hist"]))
                         + f" | {s['max']} | {s['over_cap']:.1%} | {s['batches']} |")
    return "\n\n" + "\n".join(lines) + "\n\n"


def equal() -> str:
    rows = _load()["batches"]
    return "equal" if all(r["equal_to_fairchem"] for r in rows) else "not equal"


def before_over() -> str:
    over = [r["before"]["over_cap"] for r in _load()["batches"]]
    return f"{min(over):.0%}–{max(over):.0%}"


def mix_bytes() -> str:
    return f"{_load()['mix']['bytes_per_sample']:.2f} B"


def mix_list_bytes() -> str:
    return f"{_load()['mix']['list_bytes_per_sample']:.2f} B"


FIGURES_FAIRCHEM: dict[str, Callable[[], str]] = {
    "fairchem.when": when,
    "fairchem.max_atoms_table": table,
    "fairchem.equal": equal,
    "fairchem.before_over": before_over,
    "fairchem.mix_bytes": mix_bytes,
    "fairchem.mix_list_bytes": mix_list_bytes,
}
