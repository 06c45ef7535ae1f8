"""One rank reads a whole epoch, another abandons it early; then both read the next epoch.

Usage: takeover_mismatch.py BACKEND[,BACKEND...] N B   (each backend in turn, one launch)

With prefetch, the producer fetches the next epoch's first steps at the end of an epoch. The rank
that consumed every batch takes them over; a rank that abandoned must drop them and fetch those
steps again. If the two did not agree, the second rank would run more exchanges than the first
(a collective backend's Alltoallv, or the online trial's per-step allreduce, then pair steps that
are not the same step, or hang). Every rank compares its next-epoch batches with a fresh loader's.
"""

import faulthandler
import sys

faulthandler.dump_traceback_later(60 * len(sys.argv[1].split(",")), exit=True)  # a hang ends
# the job with every stack

import numpy as np

from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.sources import synth
from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.store.shard import ShardStore
from mdloader_plugin.mpi.world import World
from checks import check

backends, N, B = sys.argv[1].split(","), int(sys.argv[2]), int(sys.argv[3])
world = World.detect()
everything = list(synth.generate("hydragnn", 11, 0, N))
lo, hi = block_bounds(N, world.size)[world.rank:world.rank + 2]
store = ShardStore.from_samples(world, everything[lo:hi], N)


def ids(batch_list):
    return [b.tobytes() for b in batch_list]


def collate(samples):
    return np.concatenate([np.asarray(s["x"]).ravel() for s in samples])


def takeover(backend: str) -> None:
    kw = dict(batch_size=B, seed=5, backend=backend, to_sample=lambda a: a, collate=collate)
    loader = MDLoader(store, prefetch=2, **kw)
    check(len(loader) >= 3, len(loader))
    loader.set_epoch(1)
    if world.rank == 0:
        got = list(loader)  # every batch: the early steps of epoch 2 can be taken over
    else:
        for step, _ in enumerate(loader):
            if step == 0:
                break  # abandoned: they must be dropped
    loader.set_epoch(2)
    second = list(loader)
    ref = MDLoader(store, prefetch=0, **kw)
    ref.set_epoch(2)
    want = list(ref)
    check(len(second) == len(want) == len(loader), (len(second), len(want), len(loader)))
    check(ids(second) == ids(want), f"rank {world.rank}: epoch 2 batches differ")
    ref.close()
    loader.close()
    print(f"rank {world.rank}: takeover ok ({backend}), speculation {loader.speculation}",
          flush=True)


for backend in backends:
    takeover(backend)
store.close()
