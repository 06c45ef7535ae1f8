"""Ranks fetch one-sided from a rank that sits in a torch.distributed (gloo) collective.

Rank 0 (on several nodes: every rank of node 0) takes its first batch, as a trainer does, then
enters a gloo all_reduce (its gradients) and stays there until every other rank has iterated a
whole epoch of batches, many of whose samples live on the blocked ranks — the situation that
deadlocked one-sided loaders inside real training at step 1 (fairchem, 3 MPICH ranks). (A rank's
progress poller runs from its loader's first fetch, mpi/progress.py.)
Prints "blocked-target ok" on rank 0 when all is done.
"""

import sys

import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI

from mdloader_plugin.records import codec
from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.sources import synth
from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.sampling.reference import world_step
from mdloader_plugin.store.shard import ShardStore
from mdloader_plugin.mpi.world import World, rendezvous_env
from checks import check

backend = sys.argv[1] if len(sys.argv) > 1 else "onesided"
world = World.detect()
n = 400
lo, hi = block_bounds(n, world.size)[world.rank:world.rank + 2]
store = ShardStore.from_samples(world, synth.generate("hydragnn", 3, int(lo), int(hi)), n,
                                digests=True)
rendezvous_env(world.comm, single_node=world.num_nodes == 1)
dist.init_process_group("gloo", rank=world.rank, world_size=world.size)

loader = MDLoader(store, batch_size=16, seed=1, backend=backend, prefetch=2,
                  to_sample=codec.encode, collate=list)
t = torch.ones(1)
blocked = world.node_of[world.rank] == 0 if world.num_nodes > 1 else world.rank == 0
if blocked:
    first = iter(loader)
    next(first)  # the first batch, then the gradients' allreduce
    dist.all_reduce(t)  # blocked in gloo while the others fetch from this rank's window
    first.close()
    loader.rewind()
else:
    seen = 0
    for step, batch in enumerate(loader):
        ids = world_step(loader.schedule, 0, step)[world.rank]
        check(len(batch) == len(ids), f"batch of {len(batch)} records for {len(ids)} ids")
        for rec, i in zip(batch, ids):
            keys = codec.decode(rec).keys()
            check(keys == {"x", "pos", "edge_index", "edge_attr", "y", "y_loc"},
                  f"sample {i}: keys {sorted(keys)}")
        seen += len(batch)
    check(seen == loader.schedule.per_rank,
          f"{seen} samples, expected {loader.schedule.per_rank}")
    dist.all_reduce(t)
check(t.item() == world.size, f"allreduce gave {t.item()}, expected {world.size}")
for batch in loader:  # then a normal epoch on every rank
    pass
loader.close()
dist.destroy_process_group()
store.close()
if world.rank == 0:
    print("blocked-target ok", flush=True)
