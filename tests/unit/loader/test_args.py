"""loader/args: every bad loader argument is one ConfigError line naming it, its value and what
it must be; the sampler the good ones make; which saved states a loader can resume."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.loader.args import (checked_schedule, checked_state, online_trial_setting,
                                         prefetch_bytes, producer_and_trial, producer_kind)
from mdloader_plugin.sampling.schedule import ResumeState, Schedule

ONE_SET = SimpleNamespace(meta={}, num_samples=10)
TWO_SETS = SimpleNamespace(meta={"dataset_starts": [0, 6, 10], "dataset_names": ["a", "b"]},
                           num_samples=10)


def sampler(size=2, batch_size=2, prefetch=0, backend="onesided", mib=1, **kw):
    kw = {"seed": 3, "mix": (None, ONE_SET), **kw}
    return checked_schedule(10, size, batch_size, prefetch, backend, None, mib, **kw)


def test_producer_is_the_thread_and_process_is_deprecated(monkeypatch):
    monkeypatch.delenv("MDLOADER_PRODUCER", raising=False)
    assert producer_kind(None) == ("thread", None)
    assert producer_kind("thread") == ("thread", None)
    kind, warning = producer_kind("process")
    assert kind == "thread" and warning.startswith(
        "producer='process' is deprecated and ignored: the producer thread builds batches")
    monkeypatch.setenv("MDLOADER_PRODUCER", "process")
    assert producer_kind(None)[1].startswith("MDLOADER_PRODUCER='process' is deprecated")
    with pytest.raises(ConfigError) as e:
        producer_kind("fork")
    assert str(e.value) == "producer must be 'thread' (or the deprecated 'process'), got 'fork'"


def test_online_check_is_the_old_name_of_online_trial(monkeypatch):
    assert online_trial_setting(True, None) == (True, None)
    assert online_trial_setting(False, None) == (False, None)
    for old in (True, False):  # the old keyword decides, with one deprecation line
        on, line = online_trial_setting(True, old)
        assert on is old and line == (f"online_check={old} is deprecated: it is now "
                                      f"online_trial={old} (same behaviour)")
    assert online_trial_setting(False, False)[0] is False
    with pytest.raises(ConfigError, match="disagree"):
        online_trial_setting(False, True)
    monkeypatch.delenv("MDLOADER_PRODUCER", raising=False)
    assert producer_and_trial(None, True, None) == ("thread", True, [])
    kind, on, lines = producer_and_trial("process", True, False)
    assert (kind, on, len(lines)) == ("thread", False, 2)


def test_prefetch_bytes_from_the_argument_or_the_environment(monkeypatch):
    monkeypatch.delenv("MDLOADER_PREFETCH_MIB", raising=False)
    assert prefetch_bytes(1.5) == 3 * 2**19
    assert prefetch_bytes(None) == 32 * 2**20  # the documented default
    monkeypatch.setenv("MDLOADER_PREFETCH_MIB", "0.25")
    assert prefetch_bytes(None) == 2**18
    for bad in (0, -1, float("nan"), "x", None):
        src = "MDLOADER_PREFETCH_MIB" if bad is None else "prefetch_mib"
        if bad is None:
            monkeypatch.setenv("MDLOADER_PREFETCH_MIB", "-2")
        with pytest.raises(ConfigError) as e:
            prefetch_bytes(bad)
        got = "'-2'" if bad is None else repr(bad)
        assert str(e.value) == f"{src} must be a number of MiB > 0, got {got}"


def test_good_arguments_make_the_sampler():
    s = sampler(size=2, batch_size=2)
    assert isinstance(s, Schedule) and s.mix is None
    assert (s.num_samples, s.world_size, s.batch_size, s.per_rank, s.seed) == (10, 2, 2, 5, 3)
    assert sampler(backend="auto").batch_size == 2  # auto: the shipped profile loads


@pytest.mark.parametrize("kw,msg", [
    ({"batch_size": 0}, "batch_size must be a positive integer, got 0"),
    ({"batch_size": True}, "batch_size must be a positive integer, got True"),
    ({"batch_size": 2.0}, "batch_size must be a positive integer, got 2.0"),
    ({"prefetch": -1}, "prefetch must be an integer >= 0, got -1"),
    ({"prefetch": False}, "prefetch must be an integer >= 0, got False"),
    ({"backend": "rdma"}, "unknown backend 'rdma'; choose one of: collective, onesided "
                          "(or 'auto')"),
    ({"mib": 0}, "prefetch_mib must be a number of MiB > 0, got 0"),
    # the sampler's own ValueError, as a ConfigError
    ({"order": "nope"}, "order must be one of auto, torch, feistel; got 'nope'"),
])
def test_bad_arguments_are_one_config_error_line(kw, msg):
    with pytest.raises(ConfigError) as e:
        sampler(**kw)
    assert str(e.value) == msg


def test_a_batch_table_replaces_the_schedule_when_made_for_this_world():
    plan = SimpleNamespace(world_size=2)
    assert sampler(size=2, batches=plan) is plan
    with pytest.raises(ConfigError) as e:
        sampler(size=4, batches=plan)
    assert str(e.value) == ("the batch table was made for 2 ranks, the loader has 4: make it with "
                            "the job's world size")


def test_several_data_sets_get_their_mix_and_proportional_is_plain():
    assert sampler(mix=(None, TWO_SETS)).mix is None  # proportional = the plain epoch
    mixed = sampler(mix=("hydragnn", TWO_SETS))
    assert (mixed.mix.name, mixed.mix.world_size) == ("hydragnn", 2)
    with pytest.raises(ConfigError, match=r"^sampling type 'zipf' is unknown; choose one of "
                                          r"proportional, weights, hydragnn, chunks"):
        sampler(mix=("zipf", TWO_SETS))


def _state(**kw):
    return {"seed": 3, "epoch": 1, "step": 2, **kw}


def test_a_matching_state_resumes():
    st = checked_state(_state(world_size=2, order="torch"), sampler(), 2)
    assert st == ResumeState(3, 1, 2, world_size=2, order="torch")


@pytest.mark.parametrize("state,mix,msg", [
    ({"epoch": 1}, None, "loader state must have integer seed, epoch, step; got {'epoch': 1}"),
    (_state(step=-1), None, "loader state has negative entries: "),
    (_state(seed=4), None, "loader state has seed 4 but this loader uses seed 3; resume with the "
                           "same seed"),
    (_state(order="feistel"), None, "loader state was saved with order 'feistel' but this "
                                    "loader uses 'torch'; resume with order='feistel'"),
    (_state(offset=11), None, "loader state offset 11 exceeds the data set's 10 samples; is it "
                              "from another data set?"),
    (_state(world_size=4), "hydragnn", "loader state is from 4 ranks but sampling 'hydragnn' "
                                       "splits the data sets by rank count; resume on 4 ranks"),
])
def test_a_state_this_loader_cannot_resume_is_one_line(state, mix, msg):
    core = sampler(mix=(mix, TWO_SETS if mix else ONE_SET))
    with pytest.raises(ConfigError) as e:
        checked_state(state, core, 2)
    assert str(e.value).startswith(msg) and "\n" not in str(e.value)


def test_a_state_from_another_world_size_resumes_without_a_rank_bound_mix():
    assert checked_state(_state(world_size=4), sampler(), 2).world_size == 4
    assert checked_state(_state(world_size=0), sampler(mix=("hydragnn", TWO_SETS)), 2).step == 2
