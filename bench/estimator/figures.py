"""The figures pages quote about the backend estimator and the backend choice on varied clusters
(``FIGURES``: key -> function; merged into ``bench.figures.FIGURES``)."""

from __future__ import annotations

from typing import Callable

from bench.reporting import load as _load, of as _of


def _held_out() -> dict:
    return _load("backend_choice.json")["evaluation"]["halves"]["held_out"]


def choice_heldout_right() -> str:
    s = _held_out()["summary"]["own"]
    return _of(round(s["online"]["right_fraction"] * s["configs"]), s["configs"])


def choice_heldout_regret() -> str:
    o = _held_out()["summary"]["own"]["online"]
    return f"{o['regret_geomean']:+.1%} geo-mean, {o['regret_worst']:+.0%} worst"


def choice_heldout_resolved() -> str:
    return _held_out()["summary"]["own"]["tie_aware"]["online"]["right_of_resolved"]


def choice_heldout_clusters() -> str:
    return ", ".join(_held_out()["clusters"])


def choice_heldout_when() -> str:
    utc = sorted(c["utc"] for c in _held_out()["configs"])
    return f"{utc[0][:10]} {utc[0][11:16]}–{utc[-1][11:16]} UTC"


def choice_halves_table() -> str:
    """Tune and held-out halves: the online trial's score, strict and tie-aware, by median and
    by mean step, per profile."""
    ev = _load("backend_choice.json")["evaluation"]
    out = ["| half | profile | online right (median step) | regret geo / worst | right model "
           "picks made >3% slower | tie-aware: ties, resolved right | by mean step (stalls "
           "paid): right, worst |", "|---|---|---|---|---|---|---|"]
    for half, h in ev["halves"].items():
        for prof in ("own", "local"):
            s, m = h["summary"][prof], h["summary_mean"][prof]
            if not s["configs"]:
                continue
            o, t = s["online"], s["tie_aware"]
            right = round(o["right_fraction"] * s["configs"])
            out.append(f"| {half.replace('_', '-')} | {prof} | {o['right_fraction']:.0%} "
                       f"({right}/{s['configs']}) | {o['regret_geomean']:+.1%} / "
                       f"{o['regret_worst']:+.0%} | {s['online_made_right_model_pick_slower']} | "
                       f"{t['ties']}, {t['online']['right_of_resolved']} | "
                       f"{m['online']['right_fraction']:.0%}, {m['online']['regret_worst']:+.0%} |")
    return "\n\n" + "\n".join(out) + "\n\n"


def choice_heldout_met() -> str:
    return "met" if _held_out()["summary"]["own"]["targets_met"] else "missed"


def _estimator(which: str) -> dict:
    return _load("estimator_accuracy.json")["summary"][which]


def estimator_model_right() -> str:
    s = _load("estimator_accuracy.json")["summary"]
    right = round(s["model"]["right_pick_fraction"] * s["configs"])
    return f"{s['model']['right_pick_fraction']:.1%} ({right}/{s['configs']})"


def estimator_model_regret() -> str:
    m = _estimator("model")
    return f"{m['regret_geomean']:.1%} geometric-mean regret, {m['regret_worst']:.0%} worst"


def estimator_online_right() -> str:
    return f"{_estimator('online')['right_pick_fraction']:.0%}"


def estimator_cluster_table() -> str:
    """Auto's picks on 2 emulated hosts per link rate, and the one-node grid beside them."""
    est = _load("estimator_cluster.json")["summary"]
    one = _load("estimator_accuracy.json")["summary"]
    out = ["| link | model: right picks | regret geo-mean / worst | after the online trial |",
           "|---|---|---|---|"]
    for rate, s in list(est.items()) + [("one node (the single-node grid)", one)]:
        m, o = s["model"], s["online"]
        out.append(f"| {rate} | {m['right_pick_fraction']:.0%} | {m['regret_geomean']:+.1%} / "
                   f"{m['regret_worst']:+.0%} | {o['right_pick_fraction']:.0%}, "
                   f"{o['regret_geomean']:+.1%} |")
    return "\n\n" + "\n".join(out) + "\n\n"


FIGURES: dict[str, Callable[[], str]] = {
    "estimator_cluster.table": estimator_cluster_table,
    "estimator.model_right": estimator_model_right,
    "estimator.model_regret": estimator_model_regret,
    "estimator.online_right": estimator_online_right,
    "choice.heldout_right": choice_heldout_right,
    "choice.heldout_regret": choice_heldout_regret,
    "choice.heldout_resolved": choice_heldout_resolved,
    "choice.heldout_clusters": choice_heldout_clusters,
    "choice.heldout_when": choice_heldout_when,
    "choice.heldout_met": choice_heldout_met,
    "choice.halves_table": choice_halves_table,
}
