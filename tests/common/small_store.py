"""A store of N variable-size records spread over the ranks, and every record's true bytes
(gathered once from the owners' buffers): the shared setup of the backends' small-step checks
(tests/mpi_scripts/onesided_small.py, collective_small.py; small_steps.py runs both in one
launch). Collective over the world."""

import numpy as np

from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.store.shard import ShardStore


def small_store(world, n: int):
    """``(store, truth)``: ``truth(i)`` is record ``i``'s bytes as its owner holds them."""
    lo, hi = block_bounds(n, world.size)[world.rank:world.rank + 2]
    natoms = np.random.default_rng(11).integers(1, 90, n)
    samples = [{"sid": np.array([i]), "pos": np.full((int(natoms[i]), 3), i, np.float32)}
               for i in range(lo, hi)]
    store = ShardStore.from_samples(world, samples, n, index="full")
    full = np.concatenate(world.comm.allgather(np.asarray(store.buffer)))
    starts = np.concatenate(world.comm.allgather(np.array([store.buffer.size])))
    base = np.concatenate([[0], np.cumsum(starts)[:-1]])

    def truth(i):
        o = int(base[store.owner_of(np.array([i]))[0]] + store.offsets[i])
        return full[o:o + int(store.nbytes[i])]

    return store, truth
