"""One rank SIGKILLs itself mid-epoch; the others keep training.

Usage: rank_kill.py BACKEND RANK STEP [allreduce|none]

The survivors fetch (Gets from, or Alltoallvs with, the dead rank) and, with ``allreduce``, enter
an MPI collective each step as a trainer's gradient allreduce would (``none``: the trainer only
computes, so a hang can only be in MDLoader's own fetch). The job must end on its own, with
every surviving rank gone, instead of hanging.
"""

import os
import signal
import sys
import time

import numpy as np

from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.store.shard import ShardStore
from mdloader_plugin.mpi.world import World

backend, victim, at_step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
trainer_allreduce = (sys.argv[4] if len(sys.argv) > 4 else "allreduce") == "allreduce"
world = World.detect()
N = 400
lo, hi = block_bounds(N, world.size)[world.rank:world.rank + 2]
samples = [{"sid": np.array([i]), "x": np.full((8, 4), i, np.float32)} for i in range(lo, hi)]
store = ShardStore.from_samples(world, samples, N)
loader = MDLoader(store, batch_size=4, backend=backend, prefetch=2,
                  to_sample=lambda a: int(a["sid"][0]), collate=list)
print(f"rank {world.rank}: ready, {len(loader)} steps an epoch", flush=True)
for epoch in range(1000):
    loader.set_epoch(epoch)
    for step, batch in enumerate(loader):
        if world.rank == victim and epoch == 0 and step == at_step:
            print(f"rank {world.rank}: killing myself at step {step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.01)  # the model's compute
        if trainer_allreduce:
            world.comm.allreduce(len(batch))  # the trainer's gradient allreduce
print("Internal error: the job outlived a dead rank", flush=True)
