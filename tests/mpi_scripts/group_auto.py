"""group_size auto on real ranks: ``group_auto.py FILE[,FILE...] BATCH BUDGET [INDEX_SHARE]``
prints the chosen W, the store's real memory a rank and the estimator's sizing of it, then one
epoch's digest.
Several comma-separated files are one store over all of them (each a data set)."""

import sys

from mdloader_plugin.store import budget as mem
from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.loader.open import open_store
from mdloader_plugin.mpi.world import World, abort_on_error

path, batch, budget = sys.argv[1], int(sys.argv[2]), sys.argv[3]
share = sys.argv[4] if len(sys.argv) > 4 else "rank"
path = path.split(",") if "," in path else path
world = World.detect()
with abort_on_error(world.comm):
    store = open_store(world, path, group_size="auto", batch_size=batch,
                       max_memory_per_rank=None if budget == "none" else budget,
                       index_share=share)
    sharing = store.group.local_size if share == "node" else 1
    lo, hi = store.local_range  # the load's peak over this rank's real block (what auto sizes)
    real = mem.load_peak(store.buffer.nbytes,
                         mem.index_bytes(store.num_samples, ranks_sharing=sharing), hi - lo)
    fullest = world.comm.allreduce(real, op=max)
    predicted = mem.per_rank_bytes(store.nbytes, store.group.size, ranks_sharing=sharing)
    with MDLoader(store, batch_size=batch, backend="auto", collate=len) as loader:
        served = world.comm.allreduce(sum(loader))
        backend = loader.backend_name
    if world.rank == 0:
        print(f"W={store.group.size} fullest={fullest} predicted={predicted} served={served} "
              f"backend={backend}", flush=True)
    store.close()
