"""loader/switch on one process: a configured backend serves every step; ``auto`` starts from
the model and, with the online trial, probes the other backend, obeys the measured times (on
``COMM_SELF``) and closes the loser; traffic and held buffers summed over the backends."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from mdloader_plugin.loader.step import EpochStats
from mdloader_plugin.loader.switch import Backends, CommView, choose_initial
from mdloader_plugin.store.shard import ShardStore


@pytest.fixture(scope="module")
def store():
    return ShardStore.from_samples(None, [{"v": np.arange(i + 1)} for i in range(16)], 16)


def backends(store, backend, online=False):
    from mpi4py import MPI

    return Backends(store, None, None, backend, "auto", per_step=4, profile="local",
                    online=online, comm=MPI.COMM_SELF if online else None)


@pytest.mark.parametrize("name", ["onesided", "collective"])
def test_a_configured_backend_serves_every_step(store, name):
    b = backends(store, name)
    assert list(b.all) == [name] and b.name == name and b.online is None
    assert b.decision == {"backend": name, "reason": "chosen in the configuration",
                          "predicted_s": {}}
    stats = EpochStats()
    assert [b.for_step(stats).name for _ in range(3)] == [name] * 3
    assert stats.backend == name and not b.timing_each_step
    assert b.collective is (name == "collective")
    b.close()
    assert b.all == {}


def test_auto_starts_from_the_model_with_both_backends(store):
    b = backends(store, "auto")
    dec = b.decision
    assert set(b.all) == {"onesided", "collective"} and b.collective  # Alltoallv steps possible
    assert b.name == dec["backend"] == dec["decision"].backend
    assert dec["reason"].startswith(f"model (local): {dec['backend']} predicted")
    assert set(dec["predicted_s"]) == {"onesided", "collective"}
    assert b.traffic() == {"on_node": 0, "off_node": 0}
    b.all["collective"].traffic["off_node"] = 5
    b.all["onesided"].traffic["off_node"] = 2
    assert b.traffic() == {"on_node": 0, "off_node": 7}
    b.all["onesided"].buffers.give(np.empty(1000, dtype=np.uint8))
    assert b.held_bytes() == 1000
    b.close()


@pytest.mark.parametrize("slow", ["onesided", "collective"])
def test_the_online_trial_probes_and_keeps_the_faster_backend(store, slow):
    b = backends(store, "auto", online=True)
    assert b.timing_each_step and b.collective
    stats, served = EpochStats(), []
    for _ in range(300):
        backend = b.for_step(stats)
        served.append(backend.name)
        b.after_step(0.01 if backend.name == slow else 0.001)
        if b.online.settled:
            break
    fast = "collective" if slow == "onesided" else "onesided"
    assert b.online.settled and not b.timing_each_step
    assert b.decision["backend"] == fast and list(b.all) == [fast]  # the loser closed
    assert set(served) == {"onesided", "collective"}  # both measured
    assert stats.backend in ("onesided+collective", "collective+onesided")
    assert b.for_step(stats).name == fast and b.name == fast
    assert b.collective is (fast == "collective")
    b.close()


def test_choose_initial_without_a_group_is_one_rank(store):
    dec = choose_initial(store, None, 4, "local")
    assert "P=1 B=4" in dec["reason"] and dec["profile"].name == "local"


def test_comm_view_is_the_world_on_another_communicator():
    world = SimpleNamespace(comm="world", rank=2, size=4, node_of=np.array([0, 0, 1, 1]),
                            num_nodes=2, local_rank=0, local_size=2)
    v = CommView(world, "private")
    assert (v.comm, v.rank, v.size, v.num_nodes, v.local_rank, v.local_size) == (
        "private", 2, 4, 2, 0, 2)
    assert v.node_of is world.node_of
