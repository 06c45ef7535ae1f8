"""A rank alive but not fetching for longer than the fetch deadline: the job must go on.

Usage: watchdog_stall.py SLEEP_S (run with a small ``MDLOADER_FETCH_TIMEOUT``, 3 ranks)

The own-loop pattern of a trainer whose rank 0 stalls between steps (a checkpoint written to a
parallel file system, a rank-0 evaluation): rank 0 sleeps SLEEP_S at step 3, every rank leaves
the loop at step 6. The other ranks' producers meanwhile wait in the collective exchanges of
steps rank 0 has not reached (and of a step prefetched after their loops ended). Rank 0 is
alive, so nobody may abort; every rank prints ``stall ok`` after the loader is closed.
"""

import sys
import time

import numpy as np

from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.mpi.world import World
from mdloader_plugin.store.shard import ShardStore

sleep_s = float(sys.argv[1])
world = World.detect()
N = 120
lo, hi = block_bounds(N, world.size)[world.rank:world.rank + 2]
samples = [{"sid": np.array([i]), "x": np.full((4, 2), i, np.float32)} for i in range(lo, hi)]
store = ShardStore.from_samples(world, samples, N)
loader = MDLoader(store, batch_size=2, backend="collective", prefetch=2, online_trial=False,
                  to_sample=lambda a: int(a["sid"][0]), collate=list)
for step, batch in enumerate(loader):
    if world.rank == 0 and step == 3:
        time.sleep(sleep_s)  # the trainer writes a checkpoint
    if step == 6:
        break
print(f"rank {world.rank}: left the loop at step {step}", flush=True)
loader.close()
store.close()
print(f"rank {world.rank}: stall ok", flush=True)
