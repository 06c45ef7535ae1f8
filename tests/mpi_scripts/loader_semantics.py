"""MDLoader on P ranks against PyG's DataLoader + DistributedSampler, abandonment, resume.

Every rank regenerates the whole synthetic set (deterministic), so it can build the batches PyG's
own DataLoader would give it, and compares them tensor for tensor with MDLoader's, for each
backend. Then: ranks abandon an iteration at different steps (as HydraGNN's graph-size scan does)
and a full epoch must still work; an epoch whose first steps were fetched early (at the end of
the previous one) yields the same batches whether those steps were taken over or dropped; and a
loader resumed from state_dict() yields exactly the remaining batches.
"""

import sys

import numpy as np
from torch.utils.data import DistributedSampler
from torch_geometric.loader import DataLoader

from mdloader_plugin.loader import producer as loader_module  # _IDLE_EXIT_S lives there
from mdloader_plugin.loader.loader import MDLoader, pyg_sample
from mdloader_plugin.sources import synth
from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.store.shard import ShardStore
from mdloader_plugin.mpi.world import World

from pyg_equal import batch_diff  # noqa: E402
from checks import check

N, B = int(sys.argv[1]), int(sys.argv[2])
world = World.detect()
everything = list(synth.generate("hydragnn", 11, 0, N))
lo, hi = block_bounds(N, world.size)[world.rank:world.rank + 2]
store = ShardStore.from_samples(world, everything[lo:hi], N)
dataset = [pyg_sample(g) for g in everything]


def same(a, b) -> bool:
    return batch_diff(a, b) == ""


for backend in ("onesided", "collective", "auto"):
    # collective: producer threads end whenever idle and are restarted when handed work
    loader_module._IDLE_EXIT_S = 0.0 if backend == "collective" else 2.0
    loader = MDLoader(store, batch_size=B, seed=5, backend=backend, prefetch=2)
    # 0 -> 3 -> 4: the early next-epoch steps guessed wrong and are dropped; 5 and 6 follow their
    # epoch and take them over; 6 again is first a miss, then (guessing "same again") a hit
    for epoch in (0, 3, 4, 5, 6, 6, 6):
        loader.set_epoch(epoch)
        sampler = DistributedSampler(dataset, num_replicas=world.size, rank=world.rank,
                                     shuffle=True, seed=5)
        sampler.set_epoch(epoch)
        ref = list(DataLoader(dataset, batch_size=B, sampler=sampler))
        got = list(loader)
        check(len(got) == len(ref) == len(loader), (len(got), len(ref)))
        diffs = [batch_diff(g, r) for g, r in zip(got, ref)]
        bad = [d for d in diffs if d]
        check(not bad, f"{backend} epoch {epoch}: {bad[:1]}")
    check(loader._column_collate.enabled, "the column-wise collate fell back")
    if backend == "onesided":  # bytes from other ranks, all on this one node
        t = loader.traffic()
        check(t["off_node"] == 0 and (t["on_node"] > 0) == (world.size > 1), t)
    if loader.prefetch:
        check(loader.speculation == {"taken": 3, "dropped": 3}, loader.speculation)

    # abandon at a rank-dependent step (collective exchanges must stay matched), then a full epoch
    loader.set_epoch(1)
    for step, _ in enumerate(loader):
        if step == world.rank % max(1, len(loader)):
            break
    loader.set_epoch(2)
    full = list(loader)
    check(len(full) == len(loader),
          f"{len(full)} batches after an abandoned epoch, len() {len(loader)}")

    # resume mid-epoch from the state dict: exactly the remaining batches
    loader.set_epoch(4)
    it = iter(loader)
    first = [next(it) for _ in range(min(2, len(loader)))]
    state = loader.state_dict()
    del it
    resumed = MDLoader(store, batch_size=B, seed=5, backend=backend, prefetch=1)
    resumed.load_state_dict(state)
    rest = list(resumed)
    loader.set_epoch(0)
    loader.set_epoch(4)
    whole = list(loader)
    check(len(first) + len(rest) == len(whole),
          f"resumed {len(first)} + {len(rest)} batches, whole epoch {len(whole)}")
    check(all(same(a, b) for a, b in zip(first + rest, whole)),
          "resumed batches differ from the whole epoch's")
    resumed.close()
    loader.close()

store.close()
if world.rank == 0:
    print(f"loader semantics ok: {world.size} ranks, N={N}, B={B}", flush=True)
