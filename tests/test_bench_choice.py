"""bench/backend_choice.py's scoring: halves kept apart, picks scored against measured steps, and
the online decision replayed on measured series (no cluster needed)."""

from __future__ import annotations

import sys

import pytest

from mpirun import ROOT

sys.path.insert(0, str(ROOT / "bench"))
backend_choice = pytest.importorskip("backend_choice")


def _row(cluster: str, batch: int, onesided: float, collective: float, hosts: int = 2) -> dict:
    return {"cluster": cluster, "shape": cluster.split("@")[0], "rate": cluster.split("@")[1],
            "dist": "hydragnn", "batch": batch, "ranks": hosts, "hosts": hosts,
            "ranks_per_host": 1, "mean_bytes": 4000.0, "std_bytes": 1500.0,
            "profile": "mdloader_plugin/estimator/profiles/perlmutter.json",
            "steps_s": {"onesided": [onesided] * 6, "collective": [collective] * 6}}


def test_halves_are_disjoint_and_held_out_is_scored_with_tuned_params():
    rows = [_row(c, b, 1e-3, 2e-3) for c in ("2x1@100mbit", "3x1@300mbit", "4x1@1gbit")
            for b in (1, 16)]
    ev = backend_choice.evaluate(rows)
    tune, held = ev["halves"]["tune"], ev["halves"]["held_out"]
    assert set(tune["clusters"]).isdisjoint(held["clusters"])
    assert set(tune["clusters"]) | set(held["clusters"]) == {r["cluster"] for r in rows}
    assert ev["params"]["margin"] in backend_choice.TUNE_GRID["margin"]
    for c in held["configs"]:  # onesided 2x faster everywhere: the measurement must find it
        assert c["best"] == "onesided" and c["online"] == "onesided"


def test_summary_counts_a_wrong_pick_and_its_regret():
    configs = [{"measured_s": {"onesided": 1.0, "collective": 1.5}, "best": "onesided",
                "model": "onesided", "online": "collective"},
               {"measured_s": {"onesided": 1.0, "collective": 1.02}, "best": "onesided",
                "model": "collective", "online": "collective"}]
    s = backend_choice.summarise(configs)
    assert s["online"]["right_fraction"] == 0.5  # 2% slower counts as right, 50% does not
    assert s["online"]["regret_worst"] == pytest.approx(0.5)
    assert s["online_made_right_model_pick_slower"] == 1 and not s["targets_met"]
