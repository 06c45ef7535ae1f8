"""The collective backend's list-planned small-step path against its numpy path, on real ranks.

Usage: collective_small.py N

For random step tables (the same on every rank) of every width from 0 to past ``SMALL_STEP``
(any owners, all-local, one remote owner, repeats), both paths must return the same offsets and
lengths, the records' true bytes, and add the same bytes to ``traffic``; the small path must be
the one taken up to ``SMALL_STEP`` records received and sent. Prints one line on rank 0."""

import sys

import numpy as np

from mdloader_plugin.backends import collective
from mdloader_plugin.backends.collective import CollectiveBackend
from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.mpi.world import World
from checks import check
from small_store import small_store

N = int(sys.argv[1])
world = World.detect()
P, rank = world.size, world.rank
bounds = block_bounds(N, world.size)
lo, hi = bounds[world.rank:world.rank + 2]
store, truth = small_store(world, N)  # variable-size records and their true bytes


be = CollectiveBackend(store, world)
small_calls = []
small = be._fetch_small
be._fetch_small = lambda *a: (small_calls.append(1), small(*a))[1]
plan_rng = np.random.default_rng(5)  # same on every rank: every rank builds the same table
checked = taken = 0
for width in list(range(0, collective.SMALL_STEP + 6)) * 2:
    kind = plan_rng.integers(0, 4)
    if kind == 0:
        table = plan_rng.integers(0, N, (P, width))  # any owners, repeats allowed
    elif kind == 1:
        table = np.stack([plan_rng.integers(bounds[r], bounds[r + 1], width) for r in range(P)])
    elif kind == 2:
        table = np.stack([plan_rng.integers(bounds[(r + 1) % P], bounds[(r + 1) % P + 1], width)
                          for r in range(P)])  # everyone takes from the next rank only
    else:
        table = np.stack([plan_rng.permutation(N)[:width] for _ in range(P)])
    table = table.astype(np.int64).reshape(P, width)
    before = dict(be.traffic)
    del small_calls[:]
    a = be.fetch(table)
    mid = dict(be.traffic)
    collective.SMALL_STEP, keep = -1, collective.SMALL_STEP  # force the numpy path
    b = be.fetch(table)
    collective.SMALL_STEP = keep
    sends = int(((table >= lo) & (table < hi)).sum())
    check(len(small_calls) == int(width <= keep and sends <= keep), (width, sends, small_calls))
    check(np.array_equal(a.offsets, b.offsets) and np.array_equal(a.nbytes, b.nbytes), width)
    ids = table[rank]
    check(np.array_equal(a.ids, ids) and np.array_equal(b.ids, ids), (width, "ids differ"))
    for i in range(width):
        want = truth(int(ids[i]))
        check(np.array_equal(a.record(i), want), (width, i))
        check(np.array_equal(b.record(i), want), (width, i))
    got_small = {k: mid[k] - before[k] for k in mid}
    got_np = {k: be.traffic[k] - mid[k] for k in mid}
    check(got_small == got_np, (got_small, got_np))
    checked += 1
    taken += len(small_calls)
    be.buffers.give(a.buf)
    be.buffers.give(b.buf)
be.close()
store.close()
world.comm.Barrier()
if rank == 0:
    print(f"collective small ok: {P} ranks, {checked} tables ({taken} on the small path)")
world.close()
