"""A rank's own step plans (sampling/planner.py) against the whole-world reference
(``sampling.reference.world_step``): the same ids in the same order, and the same send lists
the old scan of the ``[P, b]`` table found, for every rank, step and epoch of small P and N —
orders, padding, drop_last, resumed epochs, replica groups, weights, several data sets."""

import itertools

import numpy as np
import pytest

from mdloader_plugin.sampling.order import FeistelOrder
from mdloader_plugin.sampling.planner import (EpochInverse, RankPlanner, ScheduleView,
                                               scan_sends)
from mdloader_plugin.sampling.reference import ReferenceSchedule, world_step
from rank_plan_check import _check_all


CASES = list(itertools.product([1, 7, 33, 100], [1, 2, 3, 5, 8], [1, 4], [False, True],
                               ["torch", "feistel"]))


@pytest.mark.parametrize("n,p,b,drop_last,order", CASES)
def test_rows_and_sends_equal_the_whole_world_plan(n, p, b, drop_last, order):
    if drop_last and n < p:
        return
    core = ReferenceSchedule(n, p, b, seed=3, drop_last=drop_last, order=order)
    assert _check_all(core) > 0


@pytest.mark.parametrize("shuffle", [False, True])
def test_identity_and_resumed_epoch(shuffle):
    core = ReferenceSchedule(50, 4, 3, seed=1, shuffle=shuffle, order="feistel")
    core.resume_at(1, 17)  # an epoch resumed at offset 17: perm[17:] dealt anew
    _check_all(core)
    core = ReferenceSchedule(50, 4, 3, seed=1, shuffle=shuffle, order="torch", drop_last=True)
    core.resume_at(0, 49)  # one entry left: padding wraps several times
    _check_all(core, epochs=(0,))


@pytest.mark.parametrize("p,w", [(4, 2), (8, 2), (8, 4), (9, 3), (16, 2), (16, 8)])
def test_replica_groups(p, w):
    core = ReferenceSchedule(61, p, 3, seed=5, order="feistel")
    _check_all(core, group=w)


@pytest.mark.parametrize("p,w,win,cols,b", [
    (4, 4, 16, 4, 4), (8, 8, 4, 4, 4), (12, 12, 5, 2, 7), (8, 4, 2, 4, 4), (8, 2, 4, 4, 4),
    (16, 16, 4, 4, 4),
    # past 2 w g ranks the owners place their ids by their blocks (the inverse path)
    (8, 8, 2, 1, 3), (12, 12, 2, 2, 5), (11, 11, 3, 1, 4), (16, 8, 2, 1, 6), (16, 16, 4, 1, 9)])
def test_weighted_blocks(p, w, win, cols, b):
    rng = np.random.default_rng(0)
    weights = rng.integers(1, 12, 97)  # few values: ties
    core = ReferenceSchedule(97, p, b, seed=2, weights=weights, order="feistel", balance_window=win,
                         balance_columns=cols)
    _check_all(core, group=w)
    for epoch in (0, 1):  # every id of the epoch once, as without weights
        plain = ReferenceSchedule(97, p, b, seed=2, order="feistel")
        for k in range(core.steps_in(epoch)):
            assert sorted(core.plan(epoch, k).ravel()) == sorted(plain.plan(epoch, k).ravel())


@pytest.mark.parametrize("order,drop_last", [("torch", False), ("torch", True),
                                              ("feistel", True)])
def test_weighted_blocks_other_orders(order, drop_last):
    weights = np.random.default_rng(4).integers(1, 7, 83)
    core = ReferenceSchedule(83, 12, 5, seed=6, weights=weights, order=order, drop_last=drop_last,
                         balance_window=4, balance_columns=2)
    _check_all(core, group=12)


def test_weighted_resumed_epoch_by_blocks():
    weights = np.random.default_rng(3).integers(1, 9, 50)
    core = ReferenceSchedule(50, 12, 3, seed=1, weights=weights, order="feistel", balance_window=4,
                         balance_columns=1)
    core.resume_at(1, 17)
    _check_all(core)


def test_feistel_inverse():
    for n in (1, 2, 3, 1000, 4097):
        o = FeistelOrder(n, 9, 4)
        ids = o.ids_at(np.arange(n))
        assert np.array_equal(o.positions_of(ids), np.arange(n))


def test_inverse_keeps_a_few_bytes_an_own_sample():
    core = ReferenceSchedule(100_000, 8, 32, order="feistel")
    inv = EpochInverse(core.epoch_span(0, 0, 12_500), 8, 32, 0, 12_500, 0, 8)
    assert inv.ids.size == 12_500 and inv.nbytes <= 8 * 12_500 + 8 * (core.steps_in(0) + 1)


def test_owners_place_ids_by_their_blocks(monkeypatch):
    """The cases past ``2 w g`` ranks above do take the block path (not the world's step)."""
    calls = []
    real = RankPlanner._block_sends
    monkeypatch.setattr(RankPlanner, "_block_sends",
                        lambda self, *a: calls.append(1) or real(self, *a))
    weights = np.random.default_rng(0).integers(1, 12, 97)
    core = ReferenceSchedule(97, 8, 3, seed=2, weights=weights, order="feistel", balance_window=2,
                             balance_columns=1)
    _check_all(core)
    assert len(calls) == 8 * sum(core.steps_in(e) for e in (0, 1))


class _OnlyTheView:
    """A schedule seen only through :class:`ScheduleView` (what a planner may read of it)."""

    def __init__(self, schedule):
        self._s = schedule

    def __getattr__(self, name):
        allowed = set(ScheduleView.__annotations__) | {
            n for n in vars(ScheduleView) if not n.startswith("_")}
        if name not in allowed:
            raise AttributeError(f"a planner read {name!r}, which ScheduleView does not name")
        return getattr(self._s, name)


@pytest.mark.parametrize("weights,p,group", [(False, 6, None), (False, 9, 3), (True, 8, None),
                                             (True, 40, None), (True, 40, 20)])
def test_planners_read_only_the_schedule_view(weights, p, group):
    w = np.random.default_rng(1).integers(1, 9, 211) if weights else None
    core = ReferenceSchedule(211, p, 3, seed=4, weights=w, order="feistel")
    view = _OnlyTheView(core)
    width = group or p
    bounds = np.linspace(0, 211, width + 1).astype(int)
    for rank in range(p):
        r0, g = rank - rank % width, rank % width
        me = RankPlanner(view, rank, int(bounds[g]), int(bounds[g + 1]), r0, width)
        for step in range(core.steps_in(1)):
            table = world_step(core, 1, step)
            assert np.array_equal(me.row(1, step), table[rank])
            want = scan_sends(table[r0:r0 + width], me.lo, me.hi)
            got = me.sends(1, step)
            assert all(np.array_equal(a, b) for a, b in zip(got, want)), (rank, step)
