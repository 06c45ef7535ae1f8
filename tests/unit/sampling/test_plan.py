"""A rank's own plans (sampling/plan.py) against the whole-world reference (``GlobalSampler.plan``):
the same ids in the same order, and the same send lists the old scan of the ``[P, b]`` table
found, for every rank, step and epoch of small P and N — orders, padding, drop_last, resumed
epochs, replica groups, weights, several data sets."""

import itertools

import numpy as np
import pytest

from mdloader_plugin.sampling.order import FeistelOrder
from mdloader_plugin.sampling.plan import EpochInverse
from mdloader_plugin.sampling.sampler import GlobalSampler
from rank_plan_check import _check_all


CASES = list(itertools.product([1, 7, 33, 100], [1, 2, 3, 5, 8], [1, 4], [False, True],
                               ["torch", "feistel"]))


@pytest.mark.parametrize("n,p,b,drop_last,order", CASES)
def test_rows_and_sends_equal_the_whole_world_plan(n, p, b, drop_last, order):
    if drop_last and n < p:
        return
    core = GlobalSampler(n, p, b, seed=3, drop_last=drop_last, order=order)
    assert _check_all(core) > 0


@pytest.mark.parametrize("shuffle", [False, True])
def test_identity_and_resumed_epoch(shuffle):
    core = GlobalSampler(50, 4, 3, seed=1, shuffle=shuffle, order="feistel")
    core.resume_at(1, 17)  # an epoch resumed at offset 17: perm[17:] dealt anew
    _check_all(core)
    core = GlobalSampler(50, 4, 3, seed=1, shuffle=shuffle, order="torch", drop_last=True)
    core.resume_at(0, 49)  # one entry left: padding wraps several times
    _check_all(core, epochs=(0,))


@pytest.mark.parametrize("p,w", [(4, 2), (8, 2), (8, 4), (9, 3), (16, 2), (16, 8)])
def test_replica_groups(p, w):
    core = GlobalSampler(61, p, 3, seed=5, order="feistel")
    _check_all(core, group=w)


@pytest.mark.parametrize("p,w,win", [(4, 4, 16), (8, 8, 4), (12, 12, 5), (8, 4, 2),
                                     (8, 2, 4), (16, 16, 4)])
def test_weighted_windows(p, w, win):
    rng = np.random.default_rng(0)
    weights = rng.integers(1, 200, 97)
    core = GlobalSampler(97, p, 4, seed=2, weights=weights, order="feistel", balance_window=win)
    _check_all(core, group=w)
    for epoch in (0, 1):  # every id of the epoch once, as without weights
        plain = GlobalSampler(97, p, 4, seed=2, order="feistel")
        for k in range(core.steps_in(epoch)):
            assert sorted(core.plan(epoch, k).ravel()) == sorted(plain.plan(epoch, k).ravel())


def test_world_within_one_window_is_the_old_whole_world_balance():
    from mdloader_plugin.sampling.balance import balance_plan

    weights = np.random.default_rng(1).integers(1, 50, 40)
    core = GlobalSampler(40, 4, 5, seed=0, weights=weights)
    plain = GlobalSampler(40, 4, 5, seed=0)
    for k in range(core.steps_in(0)):
        assert np.array_equal(core.plan(0, k), balance_plan(plain.plan(0, k), weights))


def test_feistel_inverse():
    for n in (1, 2, 3, 1000, 4097):
        o = FeistelOrder(n, 9, 4)
        ids = o.ids_at(np.arange(n))
        assert np.array_equal(o.positions_of(ids), np.arange(n))


def test_inverse_keeps_a_few_bytes_an_own_sample():
    core = GlobalSampler(100_000, 8, 32, order="feistel")
    inv = EpochInverse(core, 0, 0, 12_500, 0, 8)
    assert inv.ids.size == 12_500 and inv.nbytes <= 8 * 12_500 + 8 * (core.steps_in(0) + 1)
