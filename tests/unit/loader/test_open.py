"""loader/open on one process: a store of the label asked for, ``group_size: auto`` sized from
the file's exact record sizes (the budget decides, every candidate logged), and how many ranks
share one index copy."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.loader.open import (choose_group_size, decide_layout, index_sharing,
                                         open_store)
from mdloader_plugin.store import budget as mem


@pytest.fixture
def log_lines(monkeypatch, caplog):
    """The INFO lines MDLoader's logger writes (it does not propagate by itself)."""
    from mdloader_plugin.core.log import get_logger

    monkeypatch.setattr(get_logger(0), "propagate", True)
    caplog.set_level(logging.INFO, logger=get_logger(0).name)
    return lambda: [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("label,n", [("trainset", 30), ("valset", 5)])
def test_open_store_reads_the_label_asked_for(split_file, label, n):
    store = open_store(None, split_file, label)
    assert store.num_samples == n and store.local_range == (0, n)


def test_group_size_auto_on_one_process_sizes_and_logs(split_file, log_lines):
    store = open_store(None, split_file, group_size="auto", batch_size=4)
    assert store.num_samples == 30
    layout = [x for x in log_lines() if x.startswith("MDLOADER-LAYOUT ")]
    assert [x.split()[1:4] for x in layout[:-1]] == [
        ["candidate", "backend=collective", "group_size=1"],
        ["candidate", "backend=onesided", "group_size=1"]]  # W = 1 only: one process
    assert len(layout) == 3 and "group_size=1 budget=" in layout[-1]
    assert "budget=none" not in layout[-1]  # the node's available memory, detected


def test_group_size_auto_without_a_batch_size_is_one_line(split_file):
    with pytest.raises(ConfigError) as e:
        open_store(None, split_file, group_size="auto", max_memory_per_rank="1GiB")
    assert str(e.value) == ("group_size auto needs the batch size (samples per rank per step), "
                            "got None")


def test_the_chosen_group_size_is_the_file_s_exact_sizing(split_file):
    from mdloader_plugin.store.shard import ShardStore

    sizes = ShardStore.from_file(None, split_file).nbytes[:30]
    dec = choose_group_size(None, split_file, "trainset", None, 4, "onesided", "local",
                            budget=mem.per_rank_bytes(sizes, 1))
    assert dec.group_size == 1 and dec.backend == "onesided"
    assert [c.memory_bytes for c in dec.candidates] == [mem.per_rank_bytes(sizes, 1)]


def test_the_budget_rules_out_the_groups_that_do_not_fit():
    sizes = np.full(1000, 4000, dtype=np.int64)
    node_of = np.zeros(4, dtype=np.int64)
    budget = mem.per_rank_bytes(sizes, 2)  # room for half of the data set, not all of it
    dec = decide_layout(sizes, node_of, 8, "collective", "local", budget)
    assert dec.group_size in (2, 4) and dec.budget == budget
    fits = {c.group_size: c.fits for c in dec.candidates}
    assert fits == {1: False, 2: True, 4: True}
    assert decide_layout(sizes, node_of, 8, "collective", "local", budget,
                         widths=[4]).group_size == 4


@pytest.mark.parametrize("share,w,want", [
    ("rank", 2, 1),  # every rank its own copy
    ("node", 2, 2),  # groups {0,1} {2,3} {4,5}: two ranks a node in each
    ("node", 3, 1),  # group {0,1,2} has one rank alone on node 1
    ("node", 6, 2),  # one group: 2 ranks on node 0, 4 on node 1, the fewest decide
])
def test_ranks_sharing_an_index_copy(share, w, want):
    node_of = np.array([0, 0, 1, 1, 1, 1])
    assert index_sharing(node_of, w, share) == want
