"""Sampler: DistributedSampler's order, equal steps on every rank, exact coverage, determinism
(coverage, determinism and balance for both orders, torch and feistel)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DistributedSampler

from mdloader_plugin.sampling.reference import ReferenceSchedule
from mdloader_plugin.sampling.schedule import ResumeState

configs = st.fixed_dictionaries({
    "n": st.integers(1, 300), "p": st.integers(1, 9), "b": st.integers(1, 70),
    "seed": st.integers(0, 2**31 - 1), "epoch": st.integers(0, 50),
    "shuffle": st.booleans(), "drop_last": st.booleans(),
    "order": st.sampled_from(["torch", "feistel"])})


def make(c, **kw):
    return ReferenceSchedule(c["n"], c["p"], c["b"], shuffle=c["shuffle"], seed=c["seed"],
                         drop_last=c["drop_last"], **{"order": c["order"], **kw})


@settings(max_examples=2500, deadline=None)
@given(configs)
def test_order_matches_torch_distributed_sampler(c):
    if c["drop_last"] and c["n"] < c["p"]:
        return
    s = make(c, order="torch")
    for r in range(c["p"]):
        ref = DistributedSampler(range(c["n"]), num_replicas=c["p"], rank=r,
                                 shuffle=c["shuffle"], seed=c["seed"], drop_last=c["drop_last"])
        ref.set_epoch(c["epoch"])
        assert s.rank_indices(c["epoch"], r).tolist() == list(ref)


@settings(max_examples=4000, deadline=None)
@given(configs)
def test_every_rank_same_steps_and_exact_coverage(c):
    if c["drop_last"] and c["n"] < c["p"]:
        with pytest.raises(ValueError, match="drop_last"):
            make(c)
        return
    s = make(c)
    plans = [s.plan(c["epoch"], k) for k in range(s.steps_per_epoch)]
    assert all(pl.shape == (c["p"], s.batch_len(k)) for k, pl in enumerate(plans))
    assert all(0 < s.batch_len(k) <= c["b"] for k in range(s.steps_per_epoch))
    counts = np.bincount(np.concatenate([pl.ravel() for pl in plans]), minlength=c["n"])
    if c["drop_last"]:
        assert counts.max() <= 1 and counts.sum() == (c["n"] // c["p"]) * c["p"]
    else:
        assert counts.min() >= 1 and counts.sum() == -(-c["n"] // c["p"]) * c["p"]
        assert counts.max() <= 1 + -(-(counts.sum() - c["n"]) // c["n"])


@settings(max_examples=1500, deadline=None)
@given(configs)
def test_plans_are_a_pure_function_of_seed_epoch_step(c):
    if c["drop_last"] and c["n"] < c["p"]:
        return
    a, b = make(c), make(c)
    b.epoch_table(c["epoch"] + 1)  # a different cache state must not matter
    for k in range(a.steps_per_epoch):
        assert np.array_equal(a.plan(c["epoch"], k), b.plan(c["epoch"], k))


@pytest.mark.parametrize("order", ["torch", "feistel"])
def test_shuffle_changes_with_epoch_and_seed(order):
    s = ReferenceSchedule(1000, 4, 10, seed=3, order=order)
    assert not np.array_equal(s.epoch_table(0), s.epoch_table(1))
    other = ReferenceSchedule(1000, 4, 10, seed=4, order=order)
    assert not np.array_equal(s.epoch_table(0), other.epoch_table(0))


def test_auto_order_is_torch_up_to_4m_samples_then_feistel():
    assert ReferenceSchedule(2**22, 4, 10).order == "torch"
    assert ReferenceSchedule(2**22 + 1, 4, 10).order == "feistel"
    with pytest.raises(ValueError, match="auto, torch, feistel"):
        ReferenceSchedule(10, 2, 3, order="random")


@pytest.mark.parametrize("kw,msg", [({"num_samples": 0}, "empty"),
                                    ({"batch_size": 0}, "batch_size"),
                                    ({"world_size": 0}, "world_size")])
def test_bad_arguments(kw, msg):
    args = {"num_samples": 10, "world_size": 2, "batch_size": 3, **kw}
    with pytest.raises(ValueError, match=msg):
        ReferenceSchedule(**args)


def test_state_round_trip_and_validation():
    st_ = ResumeState(1, 2, 3)
    assert ResumeState.from_dict(st_.to_dict()) == st_
    with pytest.raises(ValueError, match="seed, epoch, step"):
        ResumeState.from_dict({"seed": 1})


@settings(max_examples=1500, deadline=None)
@given(configs, st.integers(0, 2**32 - 1))
def test_balanced_plans_keep_each_steps_ids_and_even_the_weights(c, wseed):
    if c["drop_last"] and c["n"] < c["p"]:
        return
    w = np.random.default_rng(wseed).integers(1, 250, size=c["n"])
    plain, bal = make(c), make(c, weights=w)
    whole = make(c, weights=w, balance_columns=c["b"])  # one block a step (p <= 16: one window)
    for k in range(plain.steps_per_epoch):
        a, b, d = plain.plan(c["epoch"], k), bal.plan(c["epoch"], k), whole.plan(c["epoch"], k)
        assert a.shape == b.shape == d.shape
        assert sorted(a.ravel().tolist()) == sorted(b.ravel().tolist())
        assert sorted(a.ravel().tolist()) == sorted(d.ravel().tolist())
        for c0 in range(0, b.shape[1], bal.balance_columns):  # each block within one weight
            loads = w[b[:, c0:c0 + bal.balance_columns]].sum(axis=1)
            assert loads.max() - loads.min() <= w[b[:, c0:c0 + bal.balance_columns]].max()
        loads = w[d].sum(axis=1)
        assert loads.max() - loads.min() <= w[d].max()  # the whole step within one weight
