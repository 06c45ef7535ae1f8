"""Memory budget: sizes parse, the prediction from metadata is exact, and a small budget stops the
load before any data is read with the number of ranks that would fit."""

import numpy as np
import pytest

from mdloader_plugin.core import units
from mdloader_plugin.store import budget
from mdloader_plugin.core.errors import ConfigError, MemoryBudgetError
from mdloader_plugin.sources import synth
from mdloader_plugin.sources.adios import GraphFile, write_graphs
from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.store.shard import ShardStore


@pytest.mark.parametrize("text,value", [(4096, 4096), ("4GiB", 4 * 2**30), ("512 MiB", 2**29),
                                        ("8GB", 8 * 10**9), ("1.5k", 1500), ("100", 100),
                                        (None, None), ("", None)])
def test_parse_bytes(text, value):
    assert units.parse_bytes(text) == value


@pytest.mark.parametrize("text", ["4XB", "-1GiB", 0, -5, "GiB", True, "nan"])
def test_parse_bytes_refuses(text):
    with pytest.raises(ConfigError, match="max_memory_per_rank"):
        units.parse_bytes(text)


@pytest.fixture(scope="module")
def mixed_file(tmp_path_factory):
    """Graphs with keys of several dtypes and shapes (molecules and periodic cells)."""
    path = tmp_path_factory.mktemp("budget") / "mixed.bp"
    graphs = list(synth.generate("hydragnn", 3, 0, 157))
    for i, g in enumerate(graphs):
        g["cell"] = np.full((3, 3), i, np.float64)
        g["flag"] = np.array([i % 2], np.int8)
    write_graphs(path, {"trainset": graphs})
    return path


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_prediction_is_exact(mixed_file, size):
    with GraphFile(mixed_file) as f:
        info = f.info("trainset")
        keys = list(info.keys)
        b = block_bounds(info.ndata, size)
        predicted = [budget.predict_block(f, info, keys, int(b[r]), int(b[r + 1]))
                     for r in range(size)]
        actual = [ShardStore.from_samples(None, f.read_block("trainset", int(b[r]), int(b[r + 1])),
                                          int(b[r + 1] - b[r])).memory_report()["records_bytes"]
                  for r in range(size)]
        assert predicted == actual
        assert budget.predict_total(info, keys) >= sum(actual)


def test_small_budget_fails_before_reading_and_names_the_ranks(mixed_file, monkeypatch):
    monkeypatch.setattr(budget, "LOAD_FIXED_BYTES", 0)  # a tiny file: the arithmetic alone
    read = []
    monkeypatch.setattr(GraphFile, "read_block", lambda *a, **k: read.append(a))
    with pytest.raises(MemoryBudgetError) as exc:
        ShardStore.from_file(None, mixed_file, max_memory_per_rank="60KiB")
    msg = str(exc.value)
    assert not read, "data was read before the budget check"
    assert "max_memory_per_rank is 60.0 KiB" in msg and "run with at least" in msg
    with GraphFile(mixed_file) as f:
        info = f.info("trainset")
        total = budget.predict_total(info, list(info.keys))
    need = int(msg.split("at least ")[1].split()[0])
    idx, n = budget.index_bytes(info.ndata), info.ndata

    def peak(ranks):  # the load peak of an even share of the data set on `ranks` ranks
        return budget.load_peak(-(-total // ranks), idx, -(-n // ranks))
    assert peak(need) <= 60 * 1024 < peak(need - 1)
    assert "needs" in msg and "while loading" in msg and "--index-share node" in msg


def test_index_alone_too_big_says_so(mixed_file):
    with pytest.raises(MemoryBudgetError, match="index alone"):
        ShardStore.from_file(None, mixed_file, max_memory_per_rank=1000)


def test_budget_that_fits_loads(mixed_file):
    store = ShardStore.from_file(None, mixed_file, max_memory_per_rank="1GiB")
    assert store.num_samples == 157
