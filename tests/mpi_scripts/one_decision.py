"""One decision for the job: ``one_decision.py FILE BATCH BUDGET [INDEX_SHARE]`` opens the
store with ``group_size auto`` (and ``index_share``, default ``rank``) and serves one epoch with
``backend auto``; rank 0 prints every rank's group size and first backend
(``decided W=... backend=...``, rank order) and the samples served."""

import sys

from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.loader.open import open_store
from mdloader_plugin.mpi.world import World, abort_on_error

path, batch, budget = sys.argv[1], int(sys.argv[2]), sys.argv[3]
share = sys.argv[4] if len(sys.argv) > 4 else "rank"
world = World.detect()
with abort_on_error(world.comm):
    store = open_store(world, path, group_size="auto", batch_size=batch,
                       max_memory_per_rank=budget, index_share=share)
    with MDLoader(store, batch_size=batch, backend="auto", collate=len) as loader:
        first = loader.backend_name
        served = world.comm.allreduce(sum(loader))
    seen = world.comm.gather((store.group.size, first))
    if world.rank == 0:
        print("decided W=" + ",".join(str(w) for w, _ in seen) + " backend="
              + ",".join(b for _, b in seen) + f" served={served}", flush=True)
    store.close()
