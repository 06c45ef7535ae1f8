"""A rank's other Python threads must keep running while the loader waits in its per-step
reduction (the online trial's step time, max over ranks).

Usage: first_allreduce_gil.py PROFILE

Rank 1 starts iterating only after a message that rank 0 sends from a second Python thread (as
a trainer's thread, or the one-sided progress thread that a Get's target needs), 0.3 s after
rank 0 began its first step. Rank 0 meanwhile finishes its first fetch and waits for rank 1 in
the reduction. mpi4py's pickled ``comm.allreduce`` holds the GIL while its first call on a
communicator waits (it creates a hidden duplicate), so rank 0's thread could not send: the job
hung (issue 16). The reduction must leave the GIL free.
"""

import faulthandler
import sys
import threading
import time

import numpy as np

from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.sources import synth
from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.store.shard import ShardStore
from mdloader_plugin.mpi.world import World
from checks import check

faulthandler.dump_traceback_later(60, exit=True)  # a hang ends the job with every stack
profile = sys.argv[1]
N = 64
world = World.detect()
check(world.size == 2, f"run on 2 ranks, not {world.size}")
everything = list(synth.generate("hydragnn", 11, 0, N))
lo, hi = block_bounds(N, world.size)[world.rank:world.rank + 2]
store = ShardStore.from_samples(world, everything[lo:hi], N)
loader = MDLoader(store, batch_size=4, seed=1, backend="auto", prefetch=0, profile=profile,
                  to_sample=lambda a: a, collate=len)
check(loader._online is not None and loader._online.active, "the online trial must be on")
side = world.comm.Dup()
if world.rank == 0:
    def later():
        time.sleep(0.3)  # Python work: needs the GIL back
        side.send("go", dest=1, tag=7)

    t = threading.Thread(target=later)
    t.start()
    first = next(iter(loader))
    t.join()
else:
    msg = side.recv(source=0, tag=7)
    check(msg == "go", f"rank 0 sent {msg!r}, expected 'go'")
    first = next(iter(loader))
check(first == 4, f"first batch has {first} samples, expected 4")
loader.close()
side.Free()
store.close()
print(f"rank {world.rank}: first step served while the other thread ran", flush=True)
