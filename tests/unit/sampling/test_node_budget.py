"""``Training.Batching`` mode ``node_budget``: MDLoader's plan makes the batches upstream
HydraGNN main's ``DistributedCostAwareBatchSampler`` makes, rank by rank and epoch by epoch, and
MDLoader's loader serves them.

Upstream's sampler is loaded from the vendored main tree (``hydragnn/preprocess/batch_sampler.py``
needs only torch), so the comparison runs against upstream's own code, unmodified.
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from hydragnn_versions import source_of
from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.sampling.node_budget import NodeBudgetBatches, from_batching


@pytest.fixture(scope="module")
def upstream():
    path = source_of("main", importable=False) / "hydragnn" / "preprocess" / "batch_sampler.py"
    spec = importlib.util.spec_from_file_location("upstream_batch_sampler", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass looks its module up
    spec.loader.exec_module(mod)
    return mod


CASES = [  # (max_nodes, max_graphs, oversized, drop_last, shuffle, seed)
    (40, None, "single", False, True, 0),
    (40, 4, "single", False, True, 3),
    (25, None, "skip", False, True, 1),
    (60, 6, "single", True, True, 0),
    (40, None, "single", False, False, 0),
    (30, 3, "skip", True, False, 7),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_same_batches_as_upstreams_distributed_sampler(upstream, case, ranks):
    max_nodes, max_graphs, oversized, drop_last, shuffle, seed = case
    costs = np.random.default_rng(ranks * 100 + seed).integers(1, 35, size=157)
    plan = NodeBudgetBatches(costs, max_nodes, ranks, max_graphs=max_graphs, shuffle=shuffle,
                          seed=seed, oversized_sample=oversized, drop_last=drop_last)
    for rank in range(ranks):
        theirs = upstream.DistributedCostAwareBatchSampler(
            range(costs.size), max_nodes, num_replicas=ranks, rank=rank, costs=costs.tolist(),
            max_graphs=max_graphs, shuffle=shuffle, seed=seed, oversized_sample=oversized,
            pad_batches=not drop_last)
        for epoch in range(3):
            theirs.set_epoch(epoch)
            assert plan.rank_batches(epoch, rank) == list(theirs), (rank, epoch)
            assert plan.steps_in(epoch) == len(theirs)


def test_plan_rows_are_store_ids_padded_with_minus_one():
    costs = np.array([5, 1, 1, 1, 9, 2])
    plan = NodeBudgetBatches(costs, 9, 2, ids=np.arange(100, 106), shuffle=False)
    rows = plan.step_table(0, 0)
    assert rows.shape[0] == 2
    for r in range(2):
        want = [100 + i for i in plan.steps(0)[0][r]]
        assert rows[r][rows[r] >= 0].tolist() == want
        assert (rows[r][len(want):] == -1).all()


def test_oversized_graph_with_error_policy_is_one_line_naming_it():
    costs = np.array([3, 4, 50, 2])
    with pytest.raises(ConfigError) as err:
        from_batching({"mode": "node_budget", "max_nodes": 10}, costs, 2,
                      names=lambda i: f"graph {i} of x.bp [trainset]")
    msg = str(err.value)
    assert "\n" not in msg and "graph 2 of x.bp [trainset]" in msg and "50 nodes" in msg
    assert "max_nodes 10" in msg and "oversized_sample" in msg


def test_unknown_option_and_missing_budget_are_refused():
    with pytest.raises(ConfigError, match="max_node is not an option"):
        from_batching({"mode": "node_budget", "max_node": 5}, [1, 2], 1)
    with pytest.raises(ConfigError, match="needs max_nodes"):
        from_batching({"mode": "node_budget"}, [1, 2], 1)


def test_mdloader_serves_the_plans_batches(split_file):
    """One rank: the loader yields exactly the plan's batches (by node counts and ids)."""
    from mdloader_plugin.loader.loader import MDLoader
    from mdloader_plugin.sources.adios import GraphFile
    from mdloader_plugin.store.shard import ShardStore

    with GraphFile(split_file) as f:
        counts = f.read_extents("trainset", "x", 0, f.info("trainset").ndata)[0]
    store = ShardStore.from_file(None, split_file, "trainset")
    plan = NodeBudgetBatches(counts, int(counts.max()) * 3, 1, max_graphs=5, seed=2)
    with MDLoader(store, batch_size=4, backend="onesided", prefetch=0, batches=plan) as loader:
        for epoch in range(2):
            loader.set_epoch(epoch)
            got = [b.num_nodes for b in loader]
            want = [int(counts[b].sum()) for b in plan.rank_batches(epoch, 0)]
            assert got == want and len(loader) == len(want)
    store.close()
