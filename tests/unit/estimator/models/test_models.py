"""Cost models: sane, monotonic in the directions the formulas promise."""

import math

import numpy as np
import pytest

from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.estimator import MODELS, Workload, get_model, get_profile, predict
from mdloader_plugin.estimator.models import expected_max_normal

PROFILES = ["perlmutter", "frontier", "local"]


@pytest.mark.parametrize("prof", PROFILES)
def test_collective_grows_with_ranks(prof):
    p = get_profile(prof).params
    times = [predict("collective", Workload(P, 32, 12000, 4000, 4), p)
             for P in (4, 16, 64, 256, 2048)]
    assert all(a < b for a, b in zip(times, times[1:]))


@pytest.mark.parametrize("prof", PROFILES)
def test_onesided_grows_with_batch(prof):
    p = get_profile(prof).params
    times = [predict("onesided", Workload(64, B, 12000, 4000, 4), p) for B in (1, 4, 16, 64, 256)]
    assert all(a < b for a, b in zip(times, times[1:]))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_term_finite_and_non_negative(name):
    p = get_profile("perlmutter").params
    for P in (1, 2, 3, 4, 2048):
        for B in (1, 7, 512):
            terms = get_model(name).terms(Workload(P, B, 5000, 9000, 4), p)
            assert all(math.isfinite(v) and v >= 0 for v in terms.values()), terms


def test_bigger_records_cost_more():
    p = get_profile("perlmutter").params
    for name in MODELS:
        small = predict(name, Workload(16, 32, 2000, 0, 4), p)
        big = predict(name, Workload(16, 32, 200000, 0, 4), p)
        assert big > small


def test_irregular_sizes_raise_collective_imbalance():
    p = get_profile("perlmutter").params
    even = predict("collective", Workload(64, 64, 50000, 0, 4), p)
    skewed = predict("collective", Workload(64, 64, 50000, 80000, 4), p)
    assert skewed > even


def test_onesided_independent_of_ranks_once_ranks_exceed_batch():
    p = get_profile("perlmutter").params
    a = predict("onesided", Workload(1024, 8, 12000, 0, 4), p)
    b = predict("onesided", Workload(2048, 8, 12000, 0, 4), p)
    assert b == pytest.approx(a, rel=0.05)


def test_workload_counts():
    w = Workload(4, 8, 1000, 0, 2)
    assert w.remote_samples == 6 and w.local_samples == 2
    assert w.owners <= min(w.world_size - 1, w.batch_size)
    assert w.owners_intra + w.owners_inter == pytest.approx(w.owners)
    assert Workload(1, 8, 1000).owners == 0
    assert Workload.from_sizes(4, 8, np.array([1000, 3000])).mean_bytes == 2000


def test_expected_max_normal():
    assert expected_max_normal(1) == 0
    assert 0.5 < expected_max_normal(2) < 0.65
    assert expected_max_normal(1000) > expected_max_normal(10)


def test_bad_workload_and_unknown_model():
    with pytest.raises(ConfigError, match="batch_size"):
        Workload(4, 0, 1000)
    with pytest.raises(ConfigError, match="mean"):
        Workload(4, 1, -5)
    with pytest.raises(ConfigError, match="known: collective, onesided"):
        get_model("nccl")
