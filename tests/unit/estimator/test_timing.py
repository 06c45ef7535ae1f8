"""Calibration's clock (``estimator/timing.py``): a stage that overran leaves the later ones
less."""

import pytest

from mdloader_plugin.estimator.timing import SHARES, CalibrationSetup, stage_scale


def test_on_time_stages_keep_their_share():
    spent = 0.0
    for stage in SHARES:
        assert stage_scale(stage, spent, 45.0) == pytest.approx(1.0)
        spent += 45.0 * SHARES[stage]


def test_an_overrun_is_taken_from_the_later_stages():
    """The Get stage took 30 s of a 45 s budget (its share: 20 s): Alltoallv and the backends
    split the 15 s left by their shares instead of taking 20 s more."""
    before_get = 45.0 * (SHARES["memcpy"] + SHARES["plan"] + SHARES["dtype"])
    scale = stage_scale("alltoallv", before_get + 30.0, 45.0)
    left = 45.0 - before_get - 30.0
    assert scale == pytest.approx(left / (45.0 * (SHARES["alltoallv"] + SHARES["backends"])))
    plan = CalibrationSetup(budget_s=45.0).for_stage("alltoallv", before_get + 30.0)
    total_later = sum(plan.clock(s, None).limit for s in ("alltoallv", "backends"))
    assert total_later == pytest.approx(left)
    assert plan.point_budget("alltoallv", 4) == pytest.approx(
        plan.clock("alltoallv", None).limit / 4)


def test_a_spent_budget_leaves_nothing_and_never_more_than_the_share():
    assert stage_scale("backends", 60.0, 45.0) == 0.0
    assert stage_scale("get", 0.0, 45.0) == 1.0  # earlier stages fast: no more than its share
    assert stage_scale("get", 0.0, 0.0) == 0.0
