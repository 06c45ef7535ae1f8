"""What a real run holds: the train split of FILE in a store over all ranks, one epoch served
by MDLoader (BACKEND), then every rank's ``memory_report``; rank 0 prints the largest of each
kind over the ranks as one JSON line (``MEMORY {...}``).

    mpiexec -n 4 python -m mpi4py plan_memory.py FILE BATCH BACKEND
"""

import json
import sys

from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.store.shard import ShardStore
from mdloader_plugin.mpi.world import World

path, batch, backend = sys.argv[1], int(sys.argv[2]), sys.argv[3]
world = World.detect()
store = ShardStore.from_file(world, path, "trainset")
loader = MDLoader(store, batch_size=batch, backend=backend, prefetch=2, collate=list,
                  to_sample=lambda rec: rec)
loader.set_epoch(0)
for _ in loader:
    pass
rep = loader.memory_report()
kinds = ("records_bytes", "index_bytes", "order_bytes", "buffers_bytes", "prefetch_cap_bytes")
top = world.comm.allreduce({k: rep[k] for k in kinds},
                           op=lambda a, b, _t=None: {k: max(a[k], b[k]) for k in kinds})
loader.close()
store.close()
if world.rank == 0:
    print("MEMORY " + json.dumps(top), flush=True)
