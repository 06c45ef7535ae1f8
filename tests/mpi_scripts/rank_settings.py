"""An own training loop whose settings come from each rank's environment, as an MPMD launch
(``mpiexec -n 1 -x SEED=0 ... : -n 2 -x SEED=1 ...``) or a per-node environment sets them.

    mpiexec -n 3 python -m mpi4py rank_settings.py

``SEED`` is the loader's seed; ``MDLOADER_FETCH_TIMEOUT`` and ``HYDRAGNN_MAX_NUM_BATCH`` are
read by the package. Rank 0 prints how many ids one epoch served and how many were distinct.
"""

import os

import numpy as np

from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.mpi.world import World, abort_on_error
from mdloader_plugin.store.shard import ShardStore

N = 24
world = World.detect()
with abort_on_error(world.comm):
    lo, hi = block_bounds(N, world.size)[world.rank:world.rank + 2]
    store = ShardStore.from_samples(world, [{"id": np.array([i])} for i in range(lo, hi)], N)
    loader = MDLoader(store, batch_size=2, seed=int(os.environ.get("SEED", "0")),
                      backend="onesided", prefetch=0, to_sample=lambda d: int(d["id"][0]),
                      collate=list)
    served = [i for batch in loader for i in batch]
    every = world.comm.gather(served, root=0)
    if world.rank == 0:
        ids = [i for s in every for i in s]
        print(f"served {len(ids)} ids, {len(set(ids))} distinct", flush=True)
    loader.close()
    store.close()
