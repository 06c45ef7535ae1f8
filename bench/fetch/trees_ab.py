"""Fetch-only A/B of source trees: ``OneSidedBackend.fetch`` as the tree at ``TREE`` has it, a
batch of 64 graphs collated before each timed fetch (caches as cold as in a loader, as
``bench/fetch/profile.py --between collate``), molecules and OC20 at batch 32/128/256, median
over 30 steps of the slowest rank. Run it once a tree, alternating trees in ABBA rounds, e.g.
(``git archive REV | tar x -C /tmp/a`` for a tree). The tree's package comes first on
``PYTHONPATH`` and the run starts in it; ``bench`` (a regular package) still comes from this
checkout, behind it:

    cd /tmp/a && PYTHONPATH=/tmp/a:$REPO mpiexec -n 2 python -m mpi4py \\
        -m bench.fetch.trees_ab out_a_r1.json [LOCAL_GET_FROM]

``FLOOR=1`` adds the memcpy floor; a third argument sets ``onesided.LOCAL_GET_FROM`` (the
local indexed Get tried at a777171). Rank 0 writes the JSON and prints one line."""
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI
import mdloader_plugin
from mdloader_plugin.backends import onesided
out = sys.argv[1]
tree = str(Path(mdloader_plugin.__file__).resolve().parents[1])
if len(sys.argv) > 2:
    onesided.LOCAL_GET_FROM = int(sys.argv[2])
from mdloader_plugin.backends.onesided import OneSidedBackend
from mdloader_plugin.sampling.reference import ReferenceSchedule as GlobalSampler
from mdloader_plugin.store.shard import ShardStore
from mdloader_plugin.mpi.world import World
from mdloader_plugin.core.log import get_logger
from mdloader_plugin.records import codec
from mdloader_plugin.loader.loader import pyg_collate, pyg_sample
from bench.harness import rank_mpi, record
from bench.loaders.compare import DATASETS, WORK, memcpy_floor
world = World.detect(); get_logger(world.rank).setLevel("WARNING")
comm, rank = world.comm, world.rank
STEPS, BATCHES = 30, [32, 128, 256]
rows = []
for ds in ("hydragnn", "oc20"):
    store = ShardStore.from_file(world, str(WORK / f"{ds}-{DATASETS[ds]}.bp"))
    be = OneSidedBackend(store, world)
    lo = store.local_range[0]
    samples = [codec.decode(store.local_record(lo + i)) for i in range(64)]
    for b in BATCHES:
        smp = GlobalSampler(store.num_samples, world.size, b, shuffle=True, seed=0)
        spe = smp.steps_per_epoch
        plans = [smp.plan(k // spe, k % spe) for k in range(STEPS + 2)]
        coll = samples[:64]
        ts = []
        for k in range(STEPS + 2):
            pyg_collate([pyg_sample(a) for a in coll])
            comm.Barrier()
            t = time.perf_counter()
            f = be.fetch(plans[k])
            ts.append(time.perf_counter() - t)
            be.buffers.give(f.buf)
        a = np.asarray(ts[2:]); m = np.empty_like(a)
        comm.Allreduce(a, m, op=MPI.MAX)
        nbytes = int(np.median([store.nbytes[p[rank]].sum() for p in plans]))
        rows.append({"dataset": ds, "ranks": world.size, "batch": b, "fetch": float(np.median(m)),
                     "step_bytes_median": nbytes})
    be.close(); store.close()
if rank == 0:
    for r in rows:
        r["floor"] = memcpy_floor(r["step_bytes_median"]) if os.environ.get("FLOOR") else 0.0
    json.dump({"tree": tree, "argv": sys.argv, "loadavg": os.getloadavg(),
               "date": time.strftime("%H:%M:%S"), "rows": rows,
               "record": record({"argv": sys.argv[1:]}, mpi=rank_mpi())}, open(out, "w"))
    print(" ".join(f"{r['dataset'][:3]}/{r['batch']}={r['fetch']*1e6:.0f}us"
                   f"(fl {r['floor']*1e6:.0f})" for r in rows), flush=True)
world.close()
