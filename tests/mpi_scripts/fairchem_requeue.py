"""Requeue a fairchem run on another number of ranks through the fairchem integration's loader.

Usage: fairchem_requeue.py first|rest BACKEND CKPT_DIR OUT.json [N]

``first``: serve 4 steps of epoch 1 of fairchem's atom-capped batches (``max_atoms``) through a
``FairchemMDLoader``, then write its checkpoint state into CKPT_DIR as the requeue callback does
at fairchem's progress (epoch 1, step 4), and the ids served by all ranks.
``rest``: as fairchem resumes (``set_epoch_and_start_iteration(1, 4)``), with the checkpoint's
loader state staged as the callback stages it (a data set of N samples: default the same);
serve the rest of epoch 1; write the ids served by all ranks and each rank's step count.
"""

import json
import sys

import numpy as np

from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.integrations.fairchem.loader import FairchemMDLoader
from mdloader_plugin.integrations.fairchem.requeue import check_payload, read_state, write_state
from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.mpi.world import World, report_error
from mdloader_plugin.sampling.max_atoms import MaxAtomsBatches
from mdloader_plugin.store.shard import ShardStore

MAX_ATOMS, STEPS = 200, 4
phase, backend, ckpt, out_path = sys.argv[1:5]
N = int(sys.argv[5]) if len(sys.argv) > 5 else 203
natoms = (np.arange(N) * 37) % 90 + 5
world = World.detect()
lo, hi = block_bounds(N, world.size)[world.rank:world.rank + 2]
store = ShardStore.from_samples(
    world, [{"sid": np.array([i]), "pos": np.zeros((natoms[i], 3), np.float32)}
            for i in range(lo, hi)], N)
plan = MaxAtomsBatches(natoms, MAX_ATOMS, world.size, seed=7)
md = MDLoader(store, batch_size=4, seed=7, backend=backend, prefetch=2, batches=plan,
              to_sample=lambda a: (int(a["sid"][0]), a["pos"].shape[0]), collate=list)
loader = FairchemMDLoader(md, ["oc20.train"])


def everyone(items: list) -> list:
    return [i for part in world.comm.allgather(items) for i in part]


out = {"world_size": world.size}
try:
    if phase == "first":
        loader.batch_sampler.set_epoch_and_start_iteration(1, 0)
        mine, atoms = [], []
        for step, batch in enumerate(loader):
            mine += [i for i, _ in batch]
            atoms.append(sum(n for _, n in batch))
            if step == STEPS - 1:
                break
        if world.rank == 0:
            write_state(loader, ckpt, 1, STEPS)
        out["served"], out["atoms"] = everyone(mine), everyone(atoms)
    else:
        loader.batch_sampler.set_epoch_and_start_iteration(1, STEPS)  # fairchem's call first
        payload, path = read_state(ckpt, world.comm)
        loader.stage_state(check_payload(payload, loader, path))  # then the callback's
        batches = list(loader)
        out["steps"] = world.comm.allgather(len(batches))
        out["served"] = everyone([i for b in batches for i, _ in b])
        out["atoms"] = everyone([sum(n for _, n in b) for b in batches])
except ConfigError as exc:
    sys.exit(report_error(exc))
finally:
    md.close()
    store.close()
if world.rank == 0:
    with open(out_path, "w") as f:
        json.dump(out, f)
