"""Resume on another world size or batch size: each remaining sample exactly once in that epoch
(for both orders, torch and feistel).

Property tests over random ``(N, P_old, B_old, step, P_new, B_new, seed, epoch, drop_last,
shuffle)`` on the pure sampler functions the loader uses (``resume_position`` +
``ReferenceSchedule.resume_at``); the MPI test in ``test_reliability_mpi.py`` runs the same through
real MDLoaders on 4 then 3 ranks.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mdloader_plugin.sampling.reference import ReferenceSchedule
from mdloader_plugin.sampling.schedule import ResumeState, resume_position

cases = st.fixed_dictionaries({
    "n": st.integers(1, 240), "p_old": st.integers(1, 8), "b_old": st.integers(1, 40),
    "p_new": st.integers(1, 8), "b_new": st.integers(1, 40), "step": st.integers(0, 300),
    "seed": st.integers(0, 2**31 - 1), "epoch": st.integers(0, 20),
    "shuffle": st.booleans(), "drop_last": st.booleans(),
    "order": st.sampled_from(["torch", "feistel"])})


def sampler(c, p, b):
    return ReferenceSchedule(c["n"], p, b, shuffle=c["shuffle"], seed=c["seed"],
                         drop_last=c["drop_last"], order=c["order"])


def served(s, epoch, steps=None) -> np.ndarray:
    steps = s.steps_in(epoch) if steps is None else steps
    plans = [s.plan(epoch, k).ravel() for k in range(steps)]
    return np.concatenate(plans) if plans else np.zeros(0, np.int64)


def resume(c, state: ResumeState, p, b) -> ReferenceSchedule:
    new = sampler(c, p, b)
    offset, step = resume_position(state, c["n"], p, b, c["drop_last"])
    new.resume_at(state.epoch, offset)
    assert step == (state.step if (state.world_size, state.batch_size) == (p, b) else 0)
    return new, step


def valid(c, *sizes) -> bool:
    return not (c["drop_last"] and any(c["n"] < p for p in sizes))


def check_rest(c, before: np.ndarray, new: ReferenceSchedule, step: int, finished: bool) -> None:
    """The resumed epoch serves every not-yet-served sample (none if the epoch had finished);
    repeats only as padding; with drop_last at most once and fewer than P dropped."""
    e, p = c["epoch"], new.world_size
    after = served(new, e)[step * new.batch_size * p:] if step else served(new, e)
    for k in range(step, new.steps_in(e)):  # equal steps and batch sizes on every rank
        assert new.plan(e, k).shape == (p, new.batch_len(k, e))
    seen = set(before.tolist())
    assert not seen & set(after.tolist()), "a sample served before the resume came back"
    rest = c["n"] - len(seen)
    uniq = np.unique(after)
    if finished:
        assert after.size == 0
    elif c["drop_last"]:
        assert uniq.size == after.size == rest - rest % p
    else:
        assert uniq.size == rest, "a remaining sample was never served"
        assert after.size - rest < p or rest == 0


@settings(max_examples=1500, deadline=None)
@given(cases)
def test_resume_on_other_world_size_serves_the_rest_exactly_once(c):
    if not valid(c, c["p_old"], c["p_new"]):
        return
    old = sampler(c, c["p_old"], c["b_old"])
    step = c["step"] % (old.steps_per_epoch + 1)
    before = served(old, c["epoch"], step)
    state = ResumeState(c["seed"], c["epoch"], step, c["p_old"], c["b_old"], 0)
    new, start = resume(c, state, c["p_new"], c["b_new"])
    if (c["p_old"], c["b_old"]) == (c["p_new"], c["b_new"]):  # same job size: same batches
        assert start == step
        for k in range(step, old.steps_per_epoch):
            assert np.array_equal(new.plan(c["epoch"], k), old.plan(c["epoch"], k))
        return
    check_rest(c, before, new, 0, step == old.steps_per_epoch)
    nxt = c["epoch"] + 1  # later epochs are normal DistributedSampler epochs
    assert np.array_equal(new.epoch_table(nxt), sampler(c, c["p_new"], c["b_new"]).epoch_table(nxt))


@settings(max_examples=400, deadline=None)
@given(cases, st.integers(1, 8), st.integers(1, 40), st.integers(0, 300))
def test_resume_twice_composes(c, p3, b3, step2):
    """4 -> 3 -> 5 ranks (say): the second resume continues from the first's offset."""
    if not valid(c, c["p_old"], c["p_new"], p3):
        return
    old = sampler(c, c["p_old"], c["b_old"])
    step = c["step"] % (old.steps_per_epoch + 1)
    before = served(old, c["epoch"], step)
    st1 = ResumeState(c["seed"], c["epoch"], step, c["p_old"], c["b_old"], 0)
    mid, start = resume(c, st1, c["p_new"], c["b_new"])
    step2 = start + step2 % (mid.steps_in(c["epoch"]) - start + 1)
    seen_mid = served(mid, c["epoch"], step2)[start * mid.batch_size * mid.world_size:]
    st2 = ResumeState(c["seed"], c["epoch"], step2, c["p_new"], c["b_new"],
                       mid.offset_of(c["epoch"]))
    last, start3 = resume(c, st2, p3, b3)
    if (p3, b3) == (c["p_new"], c["b_new"]):  # same job size: the same remaining batches
        for k in range(start3, mid.steps_in(c["epoch"])):
            assert np.array_equal(last.plan(c["epoch"], k), mid.plan(c["epoch"], k))
        return
    finished = step == old.steps_per_epoch or step2 == mid.steps_in(c["epoch"])
    check_rest(c, np.concatenate([before, seen_mid]), last, 0, finished)


# -- the loader's state on one rank (serial) ------------------------------------------------------
def _loader(n=23, batch=4):
    from mdloader_plugin.loader.loader import MDLoader
    from mdloader_plugin.store.shard import ShardStore

    store = ShardStore.from_samples(None, [{"sid": np.array([i])} for i in range(n)], n)
    return MDLoader(store, batch_size=batch, seed=3, backend="onesided", prefetch=0,
                    to_sample=lambda a: int(a["sid"][0]), collate=list)


def test_state_dict_round_trip_and_bad_states():
    import pytest

    from mdloader_plugin.core.errors import ConfigError

    ld = _loader()
    ld.set_epoch(2)
    it = iter(ld)
    first = [next(it) for _ in range(2)]
    state = ld.state_dict()
    ident = {"num_samples": 23, "data": "", "shuffle": True, "drop_last": False}
    assert state == {"seed": 3, "epoch": 2, "step": 2, "world_size": 1, "batch_size": 4,
                     "offset": 0, "order": "torch", **ident}
    other = _loader(batch=3)  # another batch size: the rest of the epoch, none twice
    other.load_state_dict(state)
    rest = [i for b in other for i in b]
    assert sorted(sum(first, []) + rest) == list(range(23))
    old = _loader()
    old.load_state_dict({"seed": 3, "epoch": 2, "step": 2, **ident})  # no world_size: the own
    assert [i for b in old for i in b] == [i for b in list(_loader_epoch(2))[2:] for i in b]
    for bad, msg in [({"seed": 4, "epoch": 0, "step": 0}, "seed 4"),
                     ({"seed": 3, "epoch": 0}, "seed, epoch, step"),
                     ({"seed": 3, "epoch": 0, "step": 99}, "step 99"),
                     ({"seed": 3, "epoch": 0, "step": 0, "offset": 500}, "offset 500"),
                     ({"seed": 3, "epoch": 0, "step": 0, "order": "feistel"}, "order='feistel'"),
                     ({"seed": 3, "epoch": -1, "step": 0}, "negative")]:
        with pytest.raises(ConfigError, match=msg):
            _loader().load_state_dict({**ident, **bad})


def _loader_epoch(epoch):
    ld = _loader()
    ld.set_epoch(epoch)
    return iter(ld)


def test_hydragnn_run_saves_the_loader_state_beside_its_checkpoint(tmp_path, monkeypatch):
    import json

    from mdloader_plugin.integrations.hydragnn import resume

    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs" / "run").mkdir(parents=True)
    ld = _loader()
    list(ld)
    resume.save(ld, "run", 0)
    saved = json.loads((tmp_path / "logs" / "run" / "mdloader_state.json").read_text())
    assert saved == ld.state_dict() and saved["step"] == len(ld)
