"""The backend-choice benchmark's report (``bench/estimator/backend_choice.py``): its section of
``bench/RESULTS.md`` and its figure, from ``bench/results/backend_choice.json``.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from bench.estimator.backend_choice import _defaults, _name
from bench.ties import ALPHA, WITHIN


def _when(configs: list[dict]) -> str:
    """When a half was measured and the machine's 1-min load average then (from its rows)."""
    utc = sorted(c["utc"] for c in configs if c.get("utc"))
    load = [x for c in configs if c.get("load_avg") for x in c["load_avg"]]
    when = (f"{utc[0][:10]} {utc[0][11:16]}-{utc[-1][11:16]} UTC" if utc
            else "before 2026-12-04 13:00 UTC (time not recorded in the rows)")
    when += (f", load {min(load):.1f}-{max(load):.1f}" if load
             else ", load not recorded in the rows")
    old = sum(1 for c in configs if not c.get("utc"))
    if utc and old:
        when += (f"; {old} of {len(configs)} scored configurations are from an earlier run "
                 f"(time and load not recorded in their rows)")
    return when


def _shipped(params: dict) -> str:
    """Whether `params` are ``OnlineTrial``'s defaults, which ``backend="auto"`` runs with."""
    diff = {k: v for k, v in _defaults().items() if params.get(k) != v}
    return ("the shipped defaults" if not diff else "NOT the shipped defaults, which are "
            + ", ".join(f"{k} {v}" for k, v in diff.items()))


def results_section(doc: dict) -> list[str]:
    """The bench/RESULTS.md section (report.py calls this)."""
    ev = doc["evaluation"]
    got = [max(map(len, r["round_sizes"].values())) for r in doc["rows"]
           if r.get("round_sizes")]
    plans = sorted({(r.get("rounds", doc["rounds"]), r.get("max_rounds") or 0,
                     r.get("steps", doc["steps"])) for r in doc["rows"]})
    lines = [f"Grid: {', '.join(doc['clusters'])}; batch {doc['batches']}; "
             f"{', '.join(doc['dists'])}; "
             + " or ".join(f"{r}" + (f" (then sequential, up to {m})" if m > r else "")
                           + f" interleaved rounds x {s}" for r, m, s in plans)
             + " steps a backend"
             + (f" (rounds a configuration got: median {int(np.median(got))}, "
                f"{min(got)}-{max(got)})" if got else "")
             + "; step time to a ready batch, slowest rank. "
             f"{'FULL grid' if doc['full'] else 'REDUCED slice (not the full grid)'}. The "
             f"machine has 2 cores; the load beside each half is the 1-min load average at the "
             f"start and end of its configurations (4-6 emulated ranks busy-polling make about "
             f"4-13 of it themselves). Online "
             f"parameters chosen on the tune half: margin {ev['params']['margin']:.0%}, close "
             f"{ev['params']['close']:.0%}, rank test "
             + (f"alpha {ev['params']['alpha']}" if ev['params'].get('alpha') else "off")
             + f" ({_shipped(ev['params'])}).", ""]
    for half, h in ev["halves"].items():
        lines.append(f"- {half}: {', '.join(h['clusters'])}: measured {_when(h['configs'])}.")
    lines += ["", "**Strict score** (as before: the faster median or mean wins, however close):",
              "", "| half | profile | scored by | configs | model right | online right | "
              "online regret geo / worst | right model picks made >3% slower | targets |",
              "|---|---|---|---|---|---|---|---|---|"]
    for half, h in ev["halves"].items():
        for prof, metric in itertools.product(("own", "local"), ("median", "mean")):
            s = h["summary" if metric == "median" else "summary_mean"][prof]
            if not s["configs"]:
                continue
            lines.append(
                f"| {half} | {prof} | {metric} step | {s['configs']} | "
                f"{s['model']['right_fraction']:.0%} | {s['online']['right_fraction']:.0%} | "
                f"{s['online']['regret_geomean']:+.1%} / {s['online']['regret_worst']:+.0%} | "
                f"{s['online_made_right_model_pick_slower']} | "
                f"{'met' if s['targets_met'] else 'MISSED'} |")
    lines += ["", f"**Tie-aware score**: per configuration a stratified Mann-Whitney test over "
              f"the interleaved rounds (two-sided, alpha {ALPHA}) asks whether the two backends' "
              f"step distributions differ. Where they do not, the configuration is a *tie* "
              f"(either pick is right); where they do, the pick must be the faster backend by "
              f"median step (or within 3%). Regret is over the resolved configurations.", "",
              "| half | profile | configs | ties | resolved | model right | online right | "
              "online right of resolved | online regret geo / worst (resolved) | right model "
              "picks made >3% slower | targets | online wrong (resolved) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for half, h in ev["halves"].items():
        for prof in ("own", "local"):
            s = h["summary"][prof]
            t = s.get("tie_aware")
            if not s["configs"] or not t:
                continue
            o = t["online"]
            lines.append(
                f"| {half} | {prof} | {s['configs']} | {t['ties']} | {t['resolved']} | "
                f"{t['model']['right_fraction']:.0%} | {o['right_fraction']:.0%} | "
                f"{o['right_of_resolved']} | {o['regret_geomean_resolved']:+.1%} / "
                f"{o['regret_worst_resolved']:+.0%} | {t['online_made_right_model_pick_slower']} | "
                f"{'met' if t['targets_met'] else 'MISSED'} | {'; '.join(o['wrong']) or '-'} |")
    tails = sorted({_name(r) for r in doc["rows"] if r.get("tail_steps")})
    if tails:
        lines += ["", f"Caveat: {len(tails)} rows ({', '.join(tails)}) were measured before "
                  f"2026-12-04 15:39 UTC, when a batch-256 round alternated a full step with the "
                  f"epoch's 1-graph tail step: their medians mix the two and their scores mean "
                  f"little."]
    lines += ["", "Calibration time per cluster (s): " + ", ".join(
        f"{k} {v}" for k, v in doc["calibrate_s"].items()) + ".", "",
        "Figure: `bench/backend_choice.png`; every step time in "
        "`bench/results/backend_choice.json`."]
    return lines


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, (half, h) in zip(axes, doc["evaluation"]["halves"].items()):
        own = [c for c in h["configs"] if c["profile"] == "own"]
        for i, c in enumerate(own):
            r = c["measured_s"]["collective"] / c["measured_s"]["onesided"]
            ok = c["measured_s"][c["online"]] <= (1 + WITHIN) * c["measured_s"][c["best"]]
            ax.scatter(c["batch"], r, marker="o" if c["dist"] == "hydragnn" else "s",
                       color="tab:green" if ok else "tab:red", alpha=0.7)
        ax.axhline(1, color="k", lw=0.8)
        ax.set(xscale="log", yscale="log", xlabel="batch per rank",
               title=f"{half}: {', '.join(h['clusters'])}")
    axes[0].set_ylabel("collective / onesided step (>1: onesided faster)")
    fig.suptitle("auto (own profile + online) right (green) or not (red); circles molecules, "
                 "squares OC20", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
