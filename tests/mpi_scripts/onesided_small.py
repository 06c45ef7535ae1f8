"""The one-sided backend's list-planned small-step path against its numpy path, on real ranks.

Usage: onesided_small.py N

For random plans of every size from 0 to past ``SMALL_STEP`` (mixed owners, all-local, one
owner remote, duplicates of a record), both paths must return the same offsets and lengths, the
records' true bytes, and add the same bytes to ``traffic``; an all-local small step makes no MPI
call; both paths make one Get a remote owner. Prints one line on rank 0."""

import sys

import numpy as np

from mdloader_plugin.backends import onesided
from mdloader_plugin.backends.onesided import OneSidedBackend
from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.mpi.world import World
from checks import check
from small_store import small_store

N = int(sys.argv[1])
world = World.detect()
bounds = block_bounds(N, world.size)
lo, hi = bounds[world.rank:world.rank + 2]
store, truth = small_store(world, N)  # variable-size records and their true bytes


be = OneSidedBackend(store, world)
gets = []
win_get = be.win.Get
be.win = type("W", (), {"Get": lambda self, *a, **k: (gets.append(1), win_get(*a, **k))[1],
                        "Flush_all": lambda self: be.store.window.Flush_all()})()
plan_rng = np.random.default_rng(5 + world.rank)
checked = small = 0
for size in list(range(0, onesided.SMALL_STEP + 6)) * 2:
    kind = plan_rng.integers(0, 4)
    if kind == 0:
        ids = plan_rng.integers(0, N, size)  # any owners, repeats allowed
    elif kind == 1:
        ids = plan_rng.integers(lo, hi, size)  # all local
    elif kind == 2:
        o = (world.rank + 1) % world.size
        ids = plan_rng.integers(bounds[o], bounds[o + 1], size)  # one remote owner
    else:
        ids = plan_rng.permutation(N)[:size]
    ids = ids.astype(np.int64)
    plan = np.zeros((world.size, size), dtype=np.int64)
    plan[world.rank] = ids
    before = dict(be.traffic)
    del gets[:]
    nb, src = store.nbytes[ids], store.offsets[ids]
    a = be._fetch_small(ids, nb, src, store.owner_of(ids))
    small_gets, mid = len(gets), dict(be.traffic)
    onesided.SMALL_STEP, keep = -1, onesided.SMALL_STEP  # force the numpy path
    b = be.fetch(plan)
    onesided.SMALL_STEP = keep
    remote_owners = len(set(store.owner_of(ids).tolist()) - {world.rank})
    check(small_gets == len(gets) - small_gets == remote_owners, (size, small_gets, len(gets)))
    check(np.array_equal(a.offsets, b.offsets) and np.array_equal(a.nbytes, b.nbytes), size)
    check(np.array_equal(a.ids, b.ids), (size, "ids differ"))
    for i in range(size):
        want = truth(int(ids[i]))
        check(np.array_equal(a.record(i), want), (size, i))
        check(np.array_equal(b.record(i), want), (size, i))
    got_small = {k: mid[k] - before[k] for k in mid}
    got_np = {k: be.traffic[k] - mid[k] for k in mid}
    check(got_small == got_np, (got_small, got_np))
    if kind == 1:
        check(small_gets == 0 and sum(got_small.values()) == 0, (small_gets, got_small))
    checked += 1
    small += size <= keep
    be.buffers.give(a.buf)
    be.buffers.give(b.buf)
be.win = store.window
be.close()
store.close()
world.comm.Barrier()
if world.rank == 0:
    print(f"onesided small ok: {world.size} ranks, {checked} plans ({small} small)")
world.close()
