"""MDLoader == PyG DataLoader + DistributedSampler, batch for batch, on real MPI ranks."""

import pytest

from mpirun import mpirun

pytestmark = [pytest.mark.mpi]


# (4, 21, 1): batch 1, a tail of one sample (21 = 4 x 5 + 1), six steps a rank
@pytest.mark.parametrize("ranks,n,batch", [(1, 37, 7), (2, 101, 64), (3, 100, 7), (4, 21, 1)])
def test_batches_equal_pyg_dataloader_abandon_and_resume(ranks, n, batch):
    r = mpirun(ranks, ["tests/mpi_scripts/loader_semantics.py", n, batch], timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert f"loader semantics ok: {ranks} ranks" in r.stdout


def test_online_trial_probes_decides_collectively_and_drops_the_loser():
    r = mpirun(3, ["tests/mpi_scripts/online_switch.py"], timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "online switch ok: kept" in r.stdout


@pytest.mark.parametrize("nodes,kind,prof_nodes,blind", [
    (2, "calibrated", 1, True),     # multi-node job, single-node calibration: always probe
    (2, "calibrated", 2, False),    # calibrated across nodes: trust the model's ratio
    (1, "calibrated", 1, False),    # one node: the profile matches the job
    (2, "published figures", 1, False),  # shipped figures carry their own inter-node numbers
])
def test_probe_is_never_skipped_when_the_profile_is_blind_to_the_network(nodes, kind,
                                                                        prof_nodes, blind):
    from types import SimpleNamespace

    from mdloader_plugin.estimator.online import blind_to_network

    prof = SimpleNamespace(provenance={"kind": kind, "nodes": prof_nodes})
    assert blind_to_network(prof, nodes) is blind


@pytest.mark.parametrize("prefetch_mib,ahead", [(None, 5), (1e-4, 2)])
def test_prefetch_queue_is_bounded_by_steps_and_by_bytes(prefetch_mib, ahead):
    """prefetch=4: 4 batches wait and a 5th is made; a byte cap smaller than one batch lets one
    wait (and one be made). Counted once the producer has stopped making batches."""
    import time

    import numpy as np

    from mdloader_plugin.loader.loader import MDLoader
    from mdloader_plugin.store.shard import ShardStore

    made = []
    store = ShardStore.from_samples(None, [{"sid": np.array([i])} for i in range(64)], 64)
    loader = MDLoader(store, batch_size=4, seed=1, backend="onesided", prefetch=4,
                      prefetch_mib=prefetch_mib, to_sample=lambda a: int(a["sid"][0]),
                      collate=lambda s: made.append(s) or s)
    it = iter(loader)
    first = next(it)
    seen, deadline = -1, time.monotonic() + 30
    while seen != len(made) and time.monotonic() < deadline:  # until the producer blocks
        seen = len(made)
        time.sleep(0.5)
    assert len(made) - 1 == ahead
    rest = list(it)
    assert [first, *rest] == made[:16] and len(rest) == 15
    loader.close()


@pytest.mark.parametrize("prefetch", [0, 2])
def test_a_served_batch_is_held_by_the_trainer_alone(prefetch):
    """Once the trainer drops a batch it is freed at once, not inside the next ``next()``
    (where it would count as data-wait and keep the memory of two batches alive)."""
    import weakref

    import numpy as np

    from mdloader_plugin.loader.loader import MDLoader
    from mdloader_plugin.store.shard import ShardStore

    class Batch(list):
        pass

    store = ShardStore.from_samples(None, [{"sid": np.array([i])} for i in range(32)], 32)
    loader = MDLoader(store, batch_size=4, seed=1, backend="onesided", prefetch=prefetch,
                      to_sample=lambda a: int(a["sid"][0]), collate=Batch)
    it = iter(loader)
    batch = next(it)
    ref = weakref.ref(batch)
    del batch
    assert ref() is None, "the loader still holds the batch it served"
    assert len(list(it)) == 7
    loader.close()


def test_prefetch_mib_must_be_positive(monkeypatch):
    import numpy as np

    from mdloader_plugin.core.errors import ConfigError
    from mdloader_plugin.loader.loader import MDLoader
    from mdloader_plugin.store.shard import ShardStore

    store = ShardStore.from_samples(None, [{"sid": np.array([i])} for i in range(8)], 8)
    with pytest.raises(ConfigError, match="prefetch_mib must be a number of MiB > 0"):
        MDLoader(store, batch_size=2, backend="onesided", prefetch_mib=0)
    monkeypatch.setenv("MDLOADER_PREFETCH_MIB", "lots")
    with pytest.raises(ConfigError, match="MDLOADER_PREFETCH_MIB must be a number"):
        MDLoader(store, batch_size=2, backend="onesided")
