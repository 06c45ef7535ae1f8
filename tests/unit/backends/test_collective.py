"""backends/collective on one process: a step's records in plan order with the bytes the store
holds, what an owner packs for each destination, and when a progress thread is wanted; on 2-3
ranks, the small-step path (planned on Python lists) serves exactly what the numpy path serves.
(The Alltoallv through the loader: tests/unit/loader/test_loader.py's MPI runs.)"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from mdloader_plugin.backends.collective import CollectiveBackend, wants_progress_thread
from mdloader_plugin.records import codec
from mdloader_plugin.sampling.planner import StepPlan
from mdloader_plugin.store.shard import ShardStore


@pytest.fixture(scope="module")
def store():
    """12 records of 1..12 int64 values each (different sizes)."""
    return ShardStore.from_samples(None, [{"v": np.arange(i + 1, dtype=np.int64) * 10 + i}
                                          for i in range(12)], 12)


def test_one_rank_step_serves_the_plan_s_records_in_order(store):
    b = CollectiveBackend(store, None)
    ids = np.array([7, 0, 11, 7])
    f = b.fetch(StepPlan(ids))
    assert f.ids is ids and f.nbytes.tolist() == store.nbytes[ids].tolist()
    assert f.offsets.tolist() == [0, *np.cumsum(store.nbytes[ids])[:-1].tolist()]
    for i, sid in enumerate(ids.tolist()):
        assert codec.decode(f.record(i))["v"].tolist() == [10 * k + sid for k in range(sid + 1)]
    assert b.traffic == {"on_node": 0, "off_node": 0}  # nothing crossed a rank
    b.close()


def test_pack_groups_records_by_destination_with_their_byte_counts(store):
    b = CollectiveBackend(store, None)
    b.size = 3  # the packing alone, as for a rank of three
    wanted, dest = np.array([2, 5, 1]), np.array([0, 0, 2])
    sendbuf, counts = b._pack(wanted, dest)
    nb = store.nbytes[wanted]
    assert counts.tolist() == [nb[0] + nb[1], 0, nb[2]] and counts.dtype == np.int64
    assert sendbuf.tobytes() == b"".join(store.local_record(int(i)).tobytes() for i in wanted)


def test_close_and_set_active_without_a_progress_thread_do_nothing(store):
    b = CollectiveBackend(store, None)
    b.set_active(False)
    b.set_active(True)
    b.close()
    b.close()
    assert b.name == "collective" and b._progress is None


@pytest.mark.parametrize("nodes,env,setting,want", [
    (1, None, "auto", False),   # one node: Alltoallv on shared memory needs no thread
    (2, None, "auto", True),    # across nodes: on by default
    (2, "0", "auto", False),    # switched off
    (1, "1", "auto", True),     # forced on one node
    (2, None, False, False),    # an explicit setting wins
    (1, "0", True, True),
])
def test_progress_thread_is_wanted_across_nodes_unless_switched(monkeypatch, nodes, env, setting,
                                                              want):
    if env is None:
        monkeypatch.delenv("MDLOADER_COLL_PROGRESS_THREAD", raising=False)
    else:
        monkeypatch.setenv("MDLOADER_COLL_PROGRESS_THREAD", env)
    world = SimpleNamespace(num_nodes=nodes)
    assert wants_progress_thread(world, setting) is want
    if nodes == 1 and env is None:
        assert wants_progress_thread(None) is False  # no world: one process


@pytest.mark.parametrize("ranks", [2, 3])
def test_small_step_path_equals_numpy_path(ranks, small_steps):
    r = small_steps(ranks)  # one launch with the one-sided backend's check (conftest.py)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert f"collective small ok: {ranks} ranks" in r.stdout, r.stdout
