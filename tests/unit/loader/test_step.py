"""loader/step: one step (plan -> fetch -> build -> stage) with stand-in parts: what it yields,
what it times and reports, what a draining run still does; the epoch stats; the batch builder's
two paths; whom the watchdog names."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

from mdloader_plugin.backends.base import BufferPool, Fetched
from mdloader_plugin.loader.step import BatchBuilder, EpochStats, Steps, Watch
from mdloader_plugin.records import codec
from mdloader_plugin.sampling.planner import StepPlan


def fetched_of(samples: list[dict]) -> Fetched:
    recs = [codec.encode(s) for s in samples]
    nb = np.array([r.size for r in recs], dtype=np.int64)
    return Fetched(np.arange(len(recs)), np.concatenate(recs),
                   np.concatenate([[0], np.cumsum(nb)[:-1]]).astype(np.int64), nb)


class FakeBackend:
    name = "onesided"

    def __init__(self):
        self.buffers, self.given, self.plans = BufferPool(), [], []
        self.buffers.give = self.given.append

    def fetch(self, plan):
        self.plans.append(plan.ids.tolist())
        return fetched_of([{"sid": np.array([i])} for i in plan.ids.tolist()])


class FakeBackends:
    def __init__(self):
        self.backend, self.times = FakeBackend(), []

    def for_step(self, stats):
        stats.backend = "onesided"
        return self.backend

    def after_step(self, seconds):
        self.times.append(seconds)


def steps():
    sampler = SimpleNamespace(step=lambda epoch, step: StepPlan(np.array([10 * epoch + step,
                                                                          7])))
    build = BatchBuilder(lambda s: int(s["sid"][0]), list)
    device = SimpleNamespace(stage=lambda batch: ("staged", batch))
    return Steps(sampler, FakeBackends(), None, build, device)


def test_run_yields_each_step_s_staged_batch_and_its_bytes():
    s, stats = steps(), EpochStats(epoch=1)
    out = list(s.run(1, 2, 4, stats, threading.Event(), drain=False))
    rec = codec.record_size({"sid": np.array([0])})
    assert out == [(("staged", [12, 7]), 2 * rec), (("staged", [13, 7]), 2 * rec)]
    assert s.backends.backend.plans == [[12, 7], [13, 7]]
    assert stats.backend == "onesided" and len(stats.step_fetch_s) == 2
    assert stats.fetch_s == pytest.approx(sum(stats.step_fetch_s))
    assert len(s.backends.times) == 2 and all(t >= 0 for t in s.backends.times)


def test_an_abandoned_run_stops_unless_it_drains():
    s, gone = steps(), threading.Event()
    gone.set()
    assert list(s.run(0, 0, 3, EpochStats(), gone, drain=False)) == []
    assert s.backends.backend.plans == []
    stats = EpochStats()
    assert list(s.run(0, 0, 3, stats, gone, drain=True)) == []  # exchanged, nothing built
    b = s.backends.backend
    assert b.plans == [[0, 7], [1, 7], [2, 7]] and len(b.given) == 3
    assert len(s.backends.times) == 3 and stats.decode_s == 0.0


def test_epoch_stats_as_a_dict():
    st = EpochStats(epoch=2, steps=3, step_fetch_s=[0.1, 0.3, 0.2], backend="collective")
    d = st.as_dict()
    assert d["epoch"] == 2 and d["steps"] == 3 and d["backend"] == "collective"
    assert d["fetch_median_s"] == pytest.approx(0.2) and d["fetch_p95_s"] == pytest.approx(0.29)
    assert "fetch_median_s" not in EpochStats().as_dict()


def test_builder_collates_column_wise_and_frees_the_buffer():
    from mdloader_plugin.batching.pyg import pyg_collate, pyg_sample

    samples = [{"x": np.full((2, 3), i, np.float32), "edge_index": np.array([[0], [1]])}
               for i in range(3)]
    backend = FakeBackend()
    f = fetched_of(samples)
    batch = BatchBuilder(pyg_sample, pyg_collate)(f, backend)
    assert batch.x.shape == (6, 3) and batch.x[:, 0].tolist() == [0, 0, 1, 1, 2, 2]
    assert backend.given == [f.buf]


def test_builder_goes_sample_by_sample_for_records_columns_cannot_take():
    build = BatchBuilder(lambda s: s["sid"].tolist(), list)
    assert not build.columns.enabled  # a custom collate: the column path is off
    backend = FakeBackend()
    assert build(fetched_of([{"sid": np.array([4])}, {"sid": np.array([5, 6])}]),
                 backend) == [[4], [5, 6]]
    assert backend.given == []  # the batch was built from views of it


def test_the_watchdog_names_the_ranks_a_fetch_waits_for(monkeypatch):
    from mdloader_plugin.loader import step as step_mod

    armed = []

    class Dog:
        def __init__(self, timeout, abort, rank):
            self.timeout = timeout

        def arm(self, epoch, step, backend, waiting_for):
            armed.append((epoch, step, backend, waiting_for()))

        def disarm(self):
            armed.append("disarmed")

        def close(self):
            armed.append("closed")

    monkeypatch.setattr(step_mod, "FetchWatchdog", Dog)
    group = SimpleNamespace(size=3, world_ranks=lambda r: np.asarray(list(r)) + 4)  # ranks 4-6
    store = SimpleNamespace(owner_of=lambda ids: np.asarray(ids) // 10)
    w = Watch(5.0, None, group, store, rank=5)
    w.arm(0, 1, SimpleNamespace(name="collective"), StepPlan(np.array([1])))
    w.arm(0, 2, SimpleNamespace(name="onesided"), StepPlan(np.array([25, 3, 12])))
    w.disarm()
    w.close()
    w.close()
    assert armed == [(0, 1, "collective", [4, 6]), (0, 2, "onesided", [4, 6]), "disarmed",
                     "closed"]
