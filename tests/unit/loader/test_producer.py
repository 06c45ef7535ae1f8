"""loader/producer with stand-in steps: batches in step order, inline or from the thread; the
next epoch's first steps made ahead and handed over; errors reach the consumer; an abandoned
producer that must drain still runs every exchange it was given; loaders finished at exit."""

from __future__ import annotations

import threading

import pytest

from mdloader_plugin.loader import producer as prod
from mdloader_plugin.loader.producer import Producer
from mdloader_plugin.loader.step import EpochStats

STEPS = 4


class FakeSteps:
    """``Steps.run`` as the producer sees it: (batch name, bytes) a step; which steps ran."""

    def __init__(self, fail_at=None):
        self.ran, self.fail_at, self.lock = [], fail_at, threading.Lock()

    def run(self, epoch, start, stop, stats, abandoned, drain):
        for step in range(start, stop):
            if abandoned.is_set() and not drain:
                return
            with self.lock:
                self.ran.append((epoch, step))
            if (epoch, step) == self.fail_at:
                raise RuntimeError(f"fetch failed at {epoch}/{step}")
            stats.steps += 1
            if not abandoned.is_set():
                yield f"e{epoch}s{step}", 100


class FakeSampler:
    def steps_in(self, epoch):
        return STEPS


def producer(steps, prefetch, start=0, drain=False):
    p = Producer(steps, FakeSampler(), 0, start, EpochStats(), 1, prefetch=prefetch,
                 prefetch_bytes=1 << 20, drain=drain, backend_name=lambda: "onesided")
    p.start(threaded=prefetch > 0)
    return p


@pytest.mark.parametrize("prefetch", [0, 2])
def test_batches_come_in_step_order_from_the_start_step(prefetch):
    steps = FakeSteps()
    p = producer(steps, prefetch, start=1)
    assert [p.next() for _ in range(STEPS - 1)] == ["e0s1", "e0s2", "e0s3"]
    assert p.consumed == 3
    p.abandon()
    p.join()
    assert steps.ran[:3] == [(0, 1), (0, 2), (0, 3)]


def test_inline_producer_never_runs_ahead_and_past_the_end_is_an_internal_error():
    steps = FakeSteps()
    p = producer(steps, 0)
    assert p.next() == "e0s0" and steps.ran == [(0, 0)]  # only what was asked for
    assert not p.speculating and p.spec_steps == 0
    for _ in range(STEPS - 1):
        p.next()
    with pytest.raises(AssertionError) as e:
        p.next()
    assert str(e.value) == ("Internal error: producer ended before the epoch's last step (please "
                            "report this as an MDLoader bug)")


def test_the_next_epoch_s_first_steps_are_made_ahead_and_taken_over():
    steps = FakeSteps()
    p = producer(steps, 2)
    assert p.speculating and p.spec_epoch == 1 and p.spec_steps == 2
    first = [p.next() for _ in range(STEPS)]
    assert not p.can_take_over(2) and p.can_take_over(1)
    stats = p.take_over(2)
    assert stats.epoch == 1 and stats.backend == "onesided" and p.spec_epoch == 2
    second = [p.next() for _ in range(STEPS)]
    assert first == [f"e0s{i}" for i in range(STEPS)]
    assert second == [f"e1s{i}" for i in range(STEPS)]
    p.abandon()
    p.join()
    assert stats.steps == STEPS  # epoch 1's steps counted in the stats handed over
    assert [s for s in steps.ran if s[0] == 1] == [(1, i) for i in range(STEPS)]


def test_a_consumer_that_has_not_finished_the_epoch_cannot_take_over():
    p = producer(FakeSteps(), 2)
    p.next()
    assert not p.can_take_over(1)
    p.abandon()
    assert not p.can_take_over(1)
    p.join()


@pytest.mark.parametrize("prefetch", [0, 2])
def test_a_step_s_error_reaches_the_consumer(prefetch):
    p = producer(FakeSteps(fail_at=(0, 1)), prefetch)
    assert p.next() == "e0s0"
    with pytest.raises(RuntimeError, match="fetch failed at 0/1"):
        p.next()
    p.abandon()
    p.join()


def test_an_abandoned_inline_producer_that_drains_runs_the_remaining_exchanges():
    steps = FakeSteps()
    p = producer(steps, 0, drain=True)
    p.next()
    p.abandon()
    assert steps.ran == [(0, i) for i in range(STEPS)]
    quiet = FakeSteps()
    p = producer(quiet, 0, drain=False)
    p.next()
    p.abandon()
    assert quiet.ran == [(0, 0)]


def test_an_abandoned_threaded_producer_that_drains_runs_every_segment_it_was_given():
    steps = FakeSteps()
    p = producer(steps, 2, drain=True)
    p.next()
    p.abandon()
    p.join()
    # the epoch asked for and the next epoch's first 2 steps: all exchanged, none decoded
    assert sorted(steps.ran) == [(0, i) for i in range(STEPS)] + [(1, 0), (1, 1)]


def test_loaders_left_open_finish_their_producers_at_exit(monkeypatch):
    monkeypatch.setattr(prod, "_LIVE", type(prod._LIVE)())
    finished = []

    class Loader:
        def __init__(self, fail):
            self.fail = fail

        def _finish_producer(self):
            finished.append(self)
            if self.fail:
                raise RuntimeError("MPI already finalised")

    loaders = [Loader(True), Loader(False)]
    for ld in loaders:
        prod.finish_at_exit(ld)
    prod._stop_producers()  # one loader's error does not stop the others
    assert sorted(map(id, finished)) == sorted(map(id, loaders))


def test_prefetch_stays_with_thread_multiple():
    from mpi4py import MPI

    warned = []
    log = type("L", (), {"warning": lambda self, m: warned.append(m)})()
    want = 3 if MPI.Query_thread() >= MPI.THREAD_MULTIPLE else 0
    assert prod.usable_prefetch(3, log) == want and prod.usable_prefetch(0, log) == 0
    assert len(warned) == (want == 0)
