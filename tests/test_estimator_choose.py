"""Initial choice and the online check (pure state machine, no MPI)."""

import numpy as np
import pytest

from mdloader_plugin.estimator import Decision, OnlineCheck, choose_initial, get_profile


def test_choose_initial_picks_cheapest_and_explains():
    d = choose_initial(2048, 4, 1, np.full(100, 12000), get_profile("perlmutter"))
    assert d.backend == min(d.predicted_s, key=d.predicted_s.get) == "onesided"
    assert "perlmutter" in d.reason and "P=2048" in d.reason
    assert d.log_line().startswith("MDLOADER-BACKEND backend=onesided switched=no")


def _decision(cur="onesided", p_cur=1e-3, p_other=1.2e-3):
    other = "collective" if cur == "onesided" else "onesided"
    return Decision(cur, {cur: p_cur, other: p_other}, "test")


def _run(check, times):
    """times: backend -> step time; returns the backends used, step by step."""
    used = []
    for _ in range(100):
        if check.done:
            break
        b = check.backend_for_next_step()
        used.append(b)
        check.record(times[b])
    return used


def test_switches_when_other_measured_faster():
    check = OnlineCheck(_decision(), window=4)
    used = _run(check, {"onesided": 2e-3, "collective": 1e-3})
    assert used == ["onesided"] * 4 + ["collective"] * 4
    r = check.result
    assert r.backend == "collective" and r.switched
    assert r.measured_s == {"onesided": 2e-3, "collective": 1e-3}
    line = r.log_line()
    assert "backend=collective switched=yes" in line and "predicted_s=" in line
    assert "measured_s=collective:1.000e-03,onesided:2.000e-03" in line
    assert check.backend_for_next_step() == "collective"


def test_keeps_within_margin():
    check = OnlineCheck(_decision(), window=3, margin=0.05)
    _run(check, {"onesided": 1.00e-3, "collective": 0.97e-3})
    assert check.result.backend == "onesided" and not check.result.switched
    assert "within margin" in check.result.reason


def test_abandons_probe_that_is_much_slower():
    check = OnlineCheck(_decision(), window=5)
    used = _run(check, {"onesided": 1e-3, "collective": 5e-3})
    assert used.count("collective") == 2
    assert check.result.backend == "onesided" and "abandoned" in check.result.reason


def test_skips_probe_when_model_margin_huge():
    check = OnlineCheck(_decision(p_other=50e-3), window=3, skip_ratio=10)
    used = _run(check, {"onesided": 1e-3, "collective": 1e-4})
    assert used == ["onesided"] * 3 and "probe skipped" in check.result.reason


def test_median_resists_one_slow_warmup_step():
    check = OnlineCheck(_decision(), window=5)
    seq = iter([9e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1.5e-3, 1.5e-3, 1.5e-3, 1.5e-3, 1.5e-3])
    while not check.done:
        check.record(next(seq))
    assert check.result.backend == "onesided"


def test_identical_inputs_identical_decisions():
    runs = []
    for _ in range(3):
        c = OnlineCheck(_decision("collective", 1e-3, 2e-3), window=2)
        _run(c, {"onesided": 0.5e-3, "collective": 1e-3})
        runs.append((c.result.backend, c.result.reason, c.result.log_line()))
    assert len(set(runs)) == 1 and runs[0][0] == "onesided"


def test_bad_arguments():
    with pytest.raises(ValueError):
        OnlineCheck(_decision(), window=0)
