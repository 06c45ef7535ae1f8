"""backends/base: the step buffers' reuse, the plan-shape check, the traffic count and the
record copy both backends share (compiled and numpy paths give the same bytes)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from mdloader_plugin.backends.base import Backend, BufferPool, Fetched, gather_local
from mdloader_plugin.records import kernels
from mdloader_plugin.sampling.planner import StepPlan

MiB = 1 << 20


def test_fetched_record_is_its_slice_of_the_buffer():
    f = Fetched(np.array([7, 3]), np.arange(10, dtype=np.uint8), np.array([6, 1]),
                np.array([3, 4]))
    assert f.record(0).tolist() == [6, 7, 8] and f.record(1).tolist() == [1, 2, 3, 4]
    assert np.shares_memory(f.record(0), f.buf)


def test_small_buffers_are_exact_large_ones_whole_mib_with_room():
    pool = BufferPool()
    small = pool.take(1000)
    assert small.size == 1000 and small.base.size == 1000
    big = pool.take(3 * MiB)  # 3.3 MiB wanted: rounded up to 4 MiB
    assert big.size == 3 * MiB and big.base.size == 4 * MiB and big.dtype == np.uint8


def test_a_given_buffer_is_reused_and_only_the_largest_slots_wait():
    pool = BufferPool(slots=2)
    a, b, c = pool.take(1 * MiB), pool.take(3 * MiB), pool.take(5 * MiB)
    caps = sorted(x.base.size for x in (a, b, c))
    for x in (a, b, c):
        pool.give(x)
    assert pool.held_bytes() == caps[1] + caps[2]  # the smallest was freed
    again = pool.take(2 * MiB)  # the first fit: the 4 MiB buffer of b
    assert np.shares_memory(again, b) and again.size == 2 * MiB
    assert pool.held_bytes() == caps[2]
    pool.give(again[:10])  # a view of it: the whole buffer comes back
    assert pool.held_bytes() == caps[1] + caps[2]


class _Recording(Backend):
    def _fetch(self, plan):
        self.plan = plan
        return "fetched"


def _store(lo: int, hi: int):
    return SimpleNamespace(local_range=(lo, hi))


def test_fetch_takes_a_whole_table_as_this_rank_s_plan():
    world = SimpleNamespace(rank=1, size=2, node_of=np.zeros(2, dtype=np.int64))
    b = _Recording(_store(4, 8), world)
    assert (b.rank, b.size) == (1, 2)
    table = np.array([[5, 0, 9], [2, 6, 7]])
    assert b.fetch(table) == "fetched"
    assert b.plan.ids.tolist() == [2, 6, 7]
    ids, dest = b.plan.sends  # this rank's records (4..7) the table's rows take
    assert ids.tolist() == [5, 6, 7] and dest.tolist() == [0, 1, 1]
    plan = StepPlan(np.array([1, 2]))
    b.fetch(plan)
    assert b.plan is plan


def test_a_table_for_another_world_size_is_an_internal_error():
    b = _Recording(_store(0, 4), None)
    with pytest.raises(AssertionError) as e:
        b.fetch(np.zeros((3, 2), dtype=np.int64))
    assert str(e.value) == ("Internal error: plan shape (3, 2) for 1 ranks (please report this "
                            "as an MDLoader bug)")
    with pytest.raises(AssertionError, match=r"plan shape \(4,\) for 1 ranks"):
        b.fetch(np.zeros(4, dtype=np.int64))


def test_traffic_counts_other_ranks_bytes_by_node():
    world = SimpleNamespace(rank=1, size=4, node_of=np.array([0, 0, 1, 1]))
    b = Backend(_store(0, 1), world)
    b._count(np.array([5, 100, 7, 11]))  # its own 100 bytes are not traffic
    b._count([1, 0, 0, 2])
    assert b.traffic == {"on_node": 6, "off_node": 20}
    alone = Backend(_store(0, 1), None)
    alone._count(np.array([9]))
    assert alone.traffic == {"on_node": 0, "off_node": 0} and (alone.rank, alone.size) == (0, 1)


def test_the_base_backend_fetches_nothing_itself():
    with pytest.raises(NotImplementedError):
        Backend(_store(0, 1), None).fetch(StepPlan(np.array([0])))


@pytest.fixture(params=["compiled", "numpy"])
def path(request, monkeypatch):
    if request.param == "compiled" and kernels.get() is None:
        pytest.skip(f"compiled kernels not built: {kernels.why_not()}")
    if request.param == "numpy":
        monkeypatch.setattr(kernels, "get", lambda: None)
    return request.param


def test_gather_local_copies_each_record_to_its_place(path):
    buf = np.arange(20, dtype=np.uint8)
    out = np.full(9, 255, dtype=np.uint8)
    gather_local(buf, np.array([10, 0, 5]), np.array([3, 2, 4]), out, np.array([0, 7, 3]))
    assert out.tolist() == [10, 11, 12, 5, 6, 7, 8, 0, 1]


def test_gather_local_copies_other_dtypes_as_their_bytes(path):
    ints = np.arange(4, dtype=np.int32)  # not uint8: the kernel is not asked, numpy copies
    out = np.zeros(8, dtype=np.uint8)
    gather_local(ints, np.array([4]), np.array([8]), out, np.array([0]))
    assert out.tolist() == [1, 0, 0, 0, 2, 0, 0, 0]
