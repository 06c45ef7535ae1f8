"""``node_budget``: upstream HydraGNN main's cost-aware batches, as a batch table MDLoader fetches.

HydraGNN main (``hydragnn/preprocess/batch_sampler.py``, ``docs/cost_aware_batching.md``) packs
graphs into batches bounded by a node budget instead of a fixed graph count
(``NeuralNetwork.Training.Batching: {mode: node_budget, max_nodes, max_graphs, oversized_sample,
shuffle, seed, drop_last}``). :class:`NodeBudgetBatches` computes the same batches as its
``DistributedCostAwareBatchSampler``, for every rank at once (a pure function of the costs, the
options, the epoch and the number of ranks; no MPI):

1. order: ``torch.randperm(N)`` seeded with ``seed + epoch`` (file order without shuffle);
2. pack greedily: a graph joins the open batch unless that would pass ``max_nodes`` nodes or
   ``max_graphs`` graphs; a graph above ``max_nodes`` is an error, a batch of its own
   (``single``) or left out (``skip``); the tail batch is kept (upstream's distributed path:
   its single-process sampler drops it with ``drop_last`` unless it is full);
3. distribute: pad the batches by repeating them from the first (or, with ``drop_last``, cut) to
   a multiple of the ranks, sort them by cost (stable), cut into steps of one batch a rank,
   shuffle the steps (``randperm`` seeded with ``seed + epoch``), and give rank ``r`` the batch
   ``(r + step) mod P`` of each step.

So every rank runs the same number of steps and batches of a step have similar cost. A step's
plan is ``[P, b_max]`` store ids with short rows padded by -1 (the backends skip the padding).
Costs are node counts read from the files' extents (never the graphs themselves).
"""

from __future__ import annotations

import numpy as np

from ..core.errors import ConfigError
from .planner import TablePlanner

POLICIES = ("error", "single", "skip")


class NodeBudgetBatches:
    """Upstream's distributed cost-aware batches over a list of graphs (module docstring).

    Args:
        costs: node count of every list entry.
        max_nodes: the node budget of a batch.
        world_size: ranks the steps are dealt to.
        ids: the store id of every list entry (default: the entry's position).
        max_graphs: upstream's option.
        shuffle: upstream's option.
        seed: upstream's option.
        oversized_sample: upstream's option.
        drop_last: upstream's option.
        names: how an error names entry ``i`` (default ``graph i``).
        distributed: upstream's distributed sampler (what runs under torch.distributed):
            ``drop_last`` cuts the last incomplete step, the packing keeps its tail batch;
            False: upstream's single-process ``CostAwareBatchSampler`` (``drop_last`` drops the
            tail batch unless it is full).
    """

    #: no per-step balance weights: the costs are part of the plan (counted in ``order_bytes``)
    weights = None

    order = "node_budget"
    mix = None

    def __init__(self, costs, max_nodes: int, world_size: int, *, ids=None,
                 max_graphs: int | None = None, shuffle: bool = True, seed: int = 0,
                 oversized_sample: str = "error", drop_last: bool = False, names=None,
                 distributed: bool = True):
        self.costs = np.asarray(costs, dtype=np.int64).reshape(-1)
        self.ids = (np.arange(self.costs.size, dtype=np.int64) if ids is None
                    else np.asarray(ids, dtype=np.int64).reshape(-1))
        self.max_nodes, self.max_graphs = int(max_nodes), max_graphs
        self.world_size, self.shuffle, self.seed = int(world_size), bool(shuffle), int(seed)
        self.oversized, self.drop_last = oversized_sample, bool(drop_last)
        self.distributed = bool(distributed)
        self.num_samples = self.num_ids = int(self.costs.size)
        self.rank = 0  # whose batch_len the loader asks (MDLoader sets it)
        _check(self, names)
        self.per_rank = -(-self.num_samples // self.world_size)
        self._cache: tuple | None = None  # (epoch, steps)

    # -- upstream's algorithm -----------------------------------------------------------------
    def _order(self, epoch: int) -> list[int]:
        if not self.shuffle:
            return list(range(self.num_samples))
        import torch

        g = torch.Generator().manual_seed(self.seed + epoch)
        return torch.randperm(self.num_samples, generator=g).tolist()

    def batches(self, epoch: int) -> list[list[int]]:
        """The packed batches of `epoch` (list positions), before distribution."""
        costs, cap, graphs = self.costs.tolist(), self.max_nodes, self.max_graphs
        out, batch, cost = [], [], 0
        for i in self._order(epoch):
            c = costs[i]
            if c > cap:
                if self.oversized == "skip":
                    continue
                if batch:
                    out.append(batch)
                    batch, cost = [], 0
                out.append([i])
                continue
            if batch and (cost + c > cap or (graphs is not None and len(batch) >= graphs)):
                out.append(batch)
                batch, cost = [], 0
            batch.append(i)
            cost += c
        if batch and (not self.drop_last or self.distributed or cost == cap
                      or (graphs is not None and len(batch) == graphs)):
            out.append(batch)
        return out

    def steps(self, epoch: int) -> list[list[list[int]]]:
        """Every step of `epoch`: the batch (list positions) of each rank, in rank order."""
        if self._cache is not None and self._cache[0] == epoch:
            return self._cache[1]
        batches = [b.copy() for b in self.batches(epoch)]
        p = self.world_size
        if batches and len(batches) % p:
            if self.drop_last:
                batches = batches[:len(batches) - len(batches) % p]
            else:
                need = p - len(batches) % p
                batches.extend(batches[i % len(batches)] for i in range(need))
        costs = self.costs
        batches.sort(key=lambda b: int(costs[b].sum()))
        steps = [batches[s:s + p] for s in range(0, len(batches), p)]
        if self.shuffle and steps:
            import torch

            g = torch.Generator().manual_seed(self.seed + epoch)
            steps = [steps[i] for i in torch.randperm(len(steps), generator=g).tolist()]
        dealt = [[cand[(r + s) % p] for r in range(p)] for s, cand in enumerate(steps)]
        self._cache = (epoch, dealt)
        return dealt

    def rank_batches(self, epoch: int, rank: int) -> list[list[int]]:
        """Rank `rank`'s batches of `epoch` (what upstream's sampler on that rank yields)."""
        return [step[rank] for step in self.steps(epoch)]

    # -- what MDLoader asks of a schedule ---------------------------------------------------
    def planner(self, rank: int, lo: int = 0, hi: int = 0, group_first: int = 0,
                group_size: int | None = None) -> TablePlanner:
        """Rank `rank`'s step plans: its row and sends of each step, from the whole step."""
        return TablePlanner(self, rank, lo, hi, group_first, group_size)

    def steps_in(self, epoch: int) -> int:
        return len(self.steps(epoch))

    def step_table(self, epoch: int, step: int) -> np.ndarray:
        """``[P, b_max]`` store ids of `step` (short rows padded with -1)."""
        rows = self.steps(epoch)[step]
        out = np.full((self.world_size, max(len(r) for r in rows)), -1, dtype=np.int64)
        for r, row in enumerate(rows):
            out[r, :len(row)] = self.ids[row]
        return out

    def batch_len(self, step: int, epoch: int | None = None) -> int:
        return len(self.steps(0 if epoch is None else epoch)[step][self.rank])

    def offset_of(self, epoch: int) -> int:
        return 0

    def resume_at(self, epoch: int, offset: int) -> None:
        if offset:
            raise ConfigError("a node_budget epoch resumes only on the ranks it began on")

    @property
    def order_bytes(self) -> int:
        return int(self.costs.nbytes + self.ids.nbytes)

    def memory(self) -> dict:
        """This rank's bytes of the batch table (``order``: costs, ids and lists kept)."""
        return {"order": self.order_bytes, "balance_weights": 0}


def _check(plan: NodeBudgetBatches, names) -> None:
    """Upstream's argument checks, and ``oversized_sample: error`` at once (one line naming the
    largest graph) rather than at the first epoch."""
    if plan.max_nodes <= 0:
        raise ConfigError(f"Training.Batching.max_nodes must be positive, got {plan.max_nodes}")
    if plan.max_graphs is not None and int(plan.max_graphs) <= 0:
        raise ConfigError("Training.Batching.max_graphs must be positive when given, got "
                          f"{plan.max_graphs}")
    if plan.oversized not in POLICIES:
        raise ConfigError(f"Training.Batching.oversized_sample: {plan.oversized!r} is not one of "
                          f"{', '.join(POLICIES)}")
    if plan.ids.size != plan.costs.size:
        raise ValueError("node_budget: one id a cost")
    if plan.costs.size and plan.costs.min() <= 0:
        raise ConfigError(f"Training.Batching node_budget: graph {int(np.argmin(plan.costs))} "
                          "has no nodes; every graph needs a positive node count")
    if plan.oversized == "error" and plan.costs.size and plan.costs.max() > plan.max_nodes:
        i = int(np.argmax(plan.costs))
        what = names(i) if names is not None else f"graph {i}"
        raise ConfigError(f"Training.Batching.max_nodes {plan.max_nodes} is below {what}'s "
                          f"{int(plan.costs[i])} nodes (the largest) with oversized_sample: "
                          f"error; raise max_nodes to at least {int(plan.costs[i])} or set "
                          "oversized_sample: single (or skip)")


def from_batching(batching: dict, costs, world_size: int, *, ids=None, shuffle: bool = True,
                  names=None) -> NodeBudgetBatches:
    """The plan of a ``Training.Batching`` mapping (mode ``node_budget``); ``shuffle`` is the
    loader's, which ``Batching.shuffle`` overrides, as upstream."""
    unknown = sorted(set(batching) - {"mode", "max_nodes", "max_graphs", "oversized_sample",
                                      "shuffle", "seed", "drop_last"})
    if unknown:
        raise ConfigError(f"Training.Batching.{unknown[0]} is not an option (options: mode, "
                          "max_nodes, max_graphs, oversized_sample, shuffle, seed, drop_last)")
    if batching.get("mode", "fixed") != "node_budget":
        raise ConfigError(f"Training.Batching.mode: {batching.get('mode')!r}; choose fixed or "
                          "node_budget")
    if "max_nodes" not in batching:
        raise ConfigError("Training.Batching mode node_budget needs max_nodes")
    return NodeBudgetBatches(costs, int(batching["max_nodes"]), world_size, ids=ids,
                          max_graphs=batching.get("max_graphs"),
                          shuffle=bool(batching.get("shuffle", shuffle)),
                          seed=int(batching.get("seed", 0)),
                          oversized_sample=batching.get("oversized_sample", "error"),
                          drop_last=bool(batching.get("drop_last", False)), names=names)

