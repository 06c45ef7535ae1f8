"""Resume an epoch on another number of ranks through real MDLoaders.

Usage: resume_remap.py first|rest BACKEND STATE.json OUT.json

``first``: serve 3 steps of epoch 1, save ``loader.state_dict()`` and the ids served (all ranks).
``rest``: load that state (saved on another world size), serve the rest of epoch 1, then a full
epoch 2; write the ids served by all ranks.
"""

import json
import sys

import numpy as np

from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.store.shard import ShardStore
from mdloader_plugin.mpi.world import World

N, B = 203, 5
phase, backend, state_path, out_path = sys.argv[1:5]
world = World.detect()
lo, hi = block_bounds(N, world.size)[world.rank:world.rank + 2]
samples = [{"sid": np.array([i]), "pos": np.full((i % 7 + 1, 3), i, np.float32)}
           for i in range(lo, hi)]
store = ShardStore.from_samples(world, samples, N)
loader = MDLoader(store, batch_size=B, seed=11, backend=backend, prefetch=2,
                  to_sample=lambda a: int(a["sid"][0]), collate=list)


def everyone(ids: list[int]) -> list[int]:
    return [i for part in world.comm.allgather(ids) for i in part]


out = {"world_size": world.size}
if phase == "first":
    loader.set_epoch(1)
    mine = []
    for step, batch in enumerate(loader):
        mine += batch
        if step == 2:
            break
    out["state"] = loader.state_dict()
    out["served"] = everyone(mine)
else:
    with open(state_path) as f:
        loader.load_state_dict(json.load(f)["state"])
    out["steps"] = world.comm.allgather(len(loader))
    out["served"] = everyone([i for batch in loader for i in batch])
    loader.set_epoch(2)
    out["next_epoch"] = everyone([i for batch in loader for i in batch])
    out["next_steps"] = len(loader)
loader.close()
store.close()
if world.rank == 0:
    with open(out_path if phase == "rest" else state_path, "w") as f:
        json.dump(out, f)
