"""bench/groups/cluster.py's score on synthetic rows: a clear winner, a tie, a wrong pick the step
series resolve (issue 16's accuracy target), and which configurations get more rounds."""

from __future__ import annotations


import numpy as np
import pytest


groups = pytest.importorskip("bench.groups.cluster")
pytest.importorskip("scipy")


def _run(base: dict, pick: tuple, rounds: int = 4, steps: int = 8, noise: float = 0.05,
         seed: int = 0, budget: bool = False, fetch: dict | None = None) -> dict:
    """Interleaved rounds of every (W, backend) in `base` (seconds a step), lognormal noise;
    then auto's row picking `pick`. `fetch`: each one's fetch a step (default: its step)."""
    rng = np.random.default_rng(seed)
    rows = []
    for rnd in range(rounds):
        for (w, backend), t in (base.items() if rnd % 2 == 0 else reversed(base.items())):
            s = list(t * rng.lognormal(0, noise, steps))
            f = list((fetch or base)[w, backend] * rng.lognormal(0, noise, steps))
            rows.append({"group_size": w, "backend": backend, "chosen": backend, "round": rnd,
                         "step_s": s, "step_median_s": float(np.median(s)),
                         "fetch_s": f, "fetch_median_s": float(np.median(f))})
    auto = {"group_size": pick[0], "backend": "auto", "chosen": pick[1], "step_s": [1.0],
            "step_median_s": 1.0, "fetch_s": [1.0], "fetch_median_s": 1.0}
    if budget:
        auto["budget"] = 1
    return {"shape": "2x2", "rate": "200mbit", "kind": "oc20", "batch": 32,
            "rows": rows + [auto]}


BASE = {(1, "onesided"): 1.0, (1, "collective"): 1.0, (2, "onesided"): 1.5,
        (2, "collective"): 1.6, (4, "onesided"): 5.0, (4, "collective"): 4.0}


def test_a_clear_winner_picked_is_right_and_resolved():
    sc = groups.score(_run(BASE, (1, "collective")))
    assert sc["strict"] and sc["tie_aware"] and not sc["tie"]
    assert sc["pick"] == [1, groups.LOCAL] and sc["tested_against"] == [2, "onesided"]
    assert sc["p_value"] < 1e-3 and sc["rounds"]["W=1 local copy"] == 8  # both W = 1 pooled


def test_a_pick_the_series_cannot_tell_from_the_fastest_is_a_tie():
    base = {**BASE, (2, "onesided"): 1.0}  # W = 2 onesided the same speed as the local copy
    ties = 0
    for seed in range(20):
        run = _run(base, (2, "onesided"), noise=0.3, seed=seed)
        sc = groups.score(run)
        assert sc["tie_aware"] or not sc["tie"]  # a tie is right
        ties += sc["tie"] or sc["strict"]
    assert ties >= 17  # alpha 5%: a resolved difference in most would be a bias


def test_a_wrong_pick_resolved_is_wrong_and_named_in_the_summary():
    run = _run(BASE, (2, "onesided"))  # 1.5x the local copy, 8 steps x 4 rounds: resolved
    sc = groups.score(run)
    assert not sc["strict"] and not sc["tie"] and not sc["tie_aware"] and sc["p_value"] < 1e-3
    s = groups.summary([run])
    assert (s["configs"], s["tie_aware_right"], s["resolved"], s["resolved_right"]) == (1, 0, 1, 0)
    assert s["resolved_wrong"] == ["2x2@200mbit oc20 B32"]
    assert "0 of 1 configurations (0%) strictly" in groups.summary_text(s)


def test_within_three_percent_is_right_and_a_budget_excludes_w1():
    base = {**BASE, (2, "onesided"): 1.02}
    sc = groups.score(_run(base, (2, "onesided"), noise=0.001))
    assert not sc["strict"] and sc["within_3pct"] and sc["tie_aware"]
    [sc] = groups.scores(_run(BASE, (2, "onesided"), budget=True))  # W = 1 does not fit
    assert sc["strict"] and sc["fastest"] == [2, "onesided"] and sc["budget"] == 1


def test_more_rounds_go_to_the_unresolved_contenders_and_the_pick_only():
    rows = _run(BASE, (1, "onesided"))["rows"][:-1]
    auto = {"group_size": 1, "backend": "auto", "chosen": "onesided"}
    assert groups.contenders(rows, [auto]) == set()  # resolved: the local copy, clearly
    close = {**BASE, (2, "onesided"): 1.08}  # 8% apart, noise 30%: unresolved in 4 rounds
    rows = _run(close, (4, "collective"), noise=0.3, seed=5)["rows"][:-1]
    auto = {"group_size": 4, "backend": "collective", "chosen": "collective"}
    assert groups.contenders(rows, [auto]) == {(1, groups.LOCAL), (2, "onesided"),
                                               (4, "collective")}  # the near ones and the pick
    assert groups.contenders(rows, [{**auto, "budget": 1}]) == set()  # W = 2 clearly, then


def test_the_fetch_score_judges_what_the_layout_decides():
    """Steps whose non-fetch part is scheduler noise (the same batch work for every layout) can
    resolve a pick as wrong that the fetch series, what (backend, W) changes, call right."""
    fetch = {k: v / 10 for k, v in BASE.items()}
    steps = {**BASE, (2, "onesided"): 1.9, (2, "collective"): 1.6}
    [sc] = groups.scores(_run(steps, (2, "onesided"), budget=True, fetch=fetch))
    assert not sc["tie_aware"] and sc["fastest"] == [2, "collective"]
    assert sc["by_fetch"]["strict"] and sc["by_fetch"]["fastest"] == [2, "onesided"]
    s = groups.summary([_run(steps, (2, "onesided"), budget=True, fetch=fetch)])
    assert (s["tie_aware_right"], s["fetch_strict_right"], s["fetch_resolved_wrong"]) == (0, 1, [])
    assert "By the fetch alone" in groups.summary_text(s)
