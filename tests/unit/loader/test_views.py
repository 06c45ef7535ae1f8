"""loader/views: ``loader.sampler`` and ``loader.dataset`` as trainers read them, and the memory
report and its log line."""

from __future__ import annotations

import numpy as np
import pytest

from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.loader.views import EpochSampler, LocalSamples
from mdloader_plugin.store.shard import ShardStore


@pytest.fixture
def loader():
    store = ShardStore.from_samples(None, [{"sid": np.array([i])} for i in range(10)], 10)
    ld = MDLoader(store, batch_size=3, seed=1, backend="collective", prefetch=2,
                  prefetch_mib=2, to_sample=lambda a: int(a["sid"][0]), collate=list)
    yield ld
    ld.close()


def test_sampler_sets_the_epoch_and_counts_this_rank_s_samples(loader):
    s = loader.sampler
    assert isinstance(s, EpochSampler) and len(s) == 10
    s.set_epoch(3)
    assert loader.epoch == 3
    epoch3 = [x for b in loader for x in b]
    loader.set_epoch(0)
    assert sorted(epoch3) == list(range(10)) and epoch3 != [x for b in loader for x in b]


def test_dataset_is_this_rank_s_samples_decoded(loader):
    ds = loader.dataset
    assert isinstance(ds, LocalSamples) and len(ds) == 10
    assert ds[0] == 0 and ds[9] == 9 and ds[-1] == 9 and ds[-10] == 0
    for bad in (10, -11):
        with pytest.raises(IndexError) as e:
            ds[bad]
        assert str(e.value) == f"local sample {bad} out of range (10 on this rank)"


def test_memory_report_counts_every_structure(loader):
    m = loader.memory_report()
    rep = loader.store.memory_report()
    assert m["records_bytes"] == rep["records_bytes"] > 0
    assert m["index_bytes"] == rep["index_bytes"] and m["samples_global"] == 10
    assert m["prefetch_cap_bytes"] == 2 * 2**20  # prefetch_mib 2
    assert m["structures"]["alltoallv_counts"] == 0  # no replica group on one process
    assert m["structures"]["records"] == m["records_bytes"]
    assert m["order_bytes"] >= m["structures"]["order"] and m["order"] == "torch"
    assert m["weights_bytes"] == m["structures"]["balance_weights"] == 0  # none given


def test_memory_report_counts_the_balance_weights():
    """fairchem's atom counts (int32, one a sample) are kept as ``balance_weights``: counted."""
    store = ShardStore.from_samples(None, [{"sid": np.array([i])} for i in range(10)], 10)
    ld = MDLoader(store, batch_size=3, backend="collective", prefetch=0, collate=list,
                  balance_weights=np.arange(1, 11, dtype=np.int32))
    try:
        m = ld.memory_report()
        assert m["weights_bytes"] == m["structures"]["balance_weights"] == 40
    finally:
        ld.close()


def test_memory_log_line(loader, monkeypatch):
    lines = []
    monkeypatch.setattr(loader.log, "info", lines.append)
    from mdloader_plugin.loader.views import log_memory

    log_memory(loader.log, loader.name, loader.rank, loader.memory_report())
    m = loader.memory_report()
    (line,) = lines
    per = (m["index_bytes"] + m["order_bytes"]) / 10
    assert line.startswith(f"[{loader.name}] memory on rank 0: records ")
    assert f"order {m['order_bytes'] / 2**20:.1f} MiB (torch)" in line
    assert "(prefetch queue <= 2 MiB)" in line
    assert line.endswith(f"N-proportional: {per:.2f} B a sample")
