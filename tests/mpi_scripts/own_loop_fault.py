"""An own training loop (docs/own-loop.md) in which one rank raises mid-epoch.

Usage: own_loop_fault.py BACKEND STYLE [WHERE]   (3 ranks; run with ``python`` or ``-m mpi4py``)

Every rank allreduces once a step, as DDP's gradient allreduce does; rank 1 raises
``RuntimeError`` at its 4th step (WHERE ``trainer``, the default) or its loader's producer thread
fails while making that step's batch (WHERE ``producer``: ``to_sample`` raises). STYLE ``docs``:
the loop as docs/own-loop.md writes it (no ``with``, ``close()`` at the end, so the exception is
uncaught at interpreter exit); ``with``: the loader in a ``with`` block and the store closed in a
``finally``. The job must end at once with rank 1's line, whatever ``MDLOADER_FETCH_TIMEOUT`` is.
"""

import sys

import numpy as np
from mpi4py import MPI

from mdloader_plugin import MDLoader, ShardStore, World
from mdloader_plugin.core.blocks import block_bounds

backend, style = sys.argv[1], sys.argv[2]
where = sys.argv[3] if len(sys.argv) > 3 else "trainer"
world = World.detect()
N = 300
lo, hi = block_bounds(N, world.size)[world.rank:world.rank + 2]
samples = [{"sid": np.array([i]), "x": np.full((4, 2), i, np.float32)} for i in range(lo, hi)]
seen = [0]


def to_sample(arrays):
    seen[0] += 1
    if where == "producer" and world.rank == 1 and seen[0] > 3 * 4:
        raise RuntimeError("injected fault in rank 1's to_sample")
    return int(arrays["sid"][0])


def train(loader):
    for epoch in range(2):
        loader.set_epoch(epoch)
        for step, batch in enumerate(loader):
            if where == "trainer" and world.rank == 1 and step == 3:
                raise RuntimeError("injected fault at rank 1's 4th step")
            MPI.COMM_WORLD.allreduce(len(batch))  # the gradient allreduce
    print(f"rank {world.rank}: outlived the fault", flush=True)


store = ShardStore.from_samples(world, samples, N)
kwargs = dict(batch_size=4, backend=backend, prefetch=2, online_trial=False,
              to_sample=to_sample, collate=list)
if style == "docs":
    loader = MDLoader(store, **kwargs)
    train(loader)
    loader.close()
    store.close()
else:
    try:
        with MDLoader(store, **kwargs) as loader:
            train(loader)
    finally:
        store.close()
