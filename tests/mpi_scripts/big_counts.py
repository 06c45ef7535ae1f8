"""Every call that carries per-sample data stays within the MPI count limit, and gives the same
bytes as one uncut call. Run with ``MDLOADER_MPI_MAX_COUNT`` lowered (a few hundred bytes) on an
even number of ranks (2-4).

Usage: big_counts.py N

The communicator and window the library uses are wrapped so that every ``Allgatherv``,
``Bcast``, ``Alltoallv``, ``Isend``/``Irecv`` and ``Get`` is checked: no count, displacement or
message above the limit (in elements and in bytes). Checked: the index exchange (compact, full,
digests), the node-shared index across two emulated nodes, the broadcasts of the replica copy
(``replicate: copy``: records and record sizes), the fairchem atom counts, the one-sided Gets (one
record larger than the limit, and an owner's run of records over it) and the collective exchange
(pair messages over ``limit / P``), each equal to the result of the full index's store and loaders
built with no limit."""

import os
import sys

import numpy as np
from mpi4py import MPI

from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.integrations.fairchem.loader import global_natoms
from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.mpi.world import World
from mdloader_plugin.store.shard import ShardStore
from checks import check

try:  # absent before the calls were cut: the lowered limit then has no effect (the test fails)
    from mdloader_plugin.mpi import collectives
except ImportError:
    collectives = None

LIMIT = int(os.environ["MDLOADER_MPI_MAX_COUNT"])
N = int(sys.argv[1])
SEEN: dict[str, int] = {}  # call -> how many times it carried data
OVER: dict[str, int] = {}  # call -> the largest count, displacement or message above LIMIT
WATCH = {"on": False}


def _note(call: str, *sizes) -> None:
    if not WATCH["on"]:
        return
    big = max([int(s) for s in sizes] + [0])
    if big > LIMIT:
        OVER[call] = max(OVER.get(call, 0), big)
    SEEN[call] = SEEN.get(call, 0) + 1


def _spec(spec) -> list[int]:
    """Counts, displacements and bytes an mpi4py buffer spec hands to MPI: the buffer's size
    when it is the count (``[buf, type]``), else the counts, displacements and their bytes."""
    buf = spec[0]
    if not (len(spec) == 3 and isinstance(spec[1], tuple)):
        return [memoryview(buf).nbytes]
    item = buf.dtype.itemsize if isinstance(buf, np.ndarray) else 1
    counts, displs = spec[1]
    return ([int(c) for c in counts] + [int(d) for d in displs]
            + [int(c) * item for c in counts] + [int(d) * item for d in displs])


class Counting(MPI.Intracomm):
    """The library's communicator, every data-carrying call checked against the limit."""

    def Allgatherv(self, s, r):
        _note("Allgatherv", *_spec(s), *_spec(r))
        return super().Allgatherv(s, r)

    def Bcast(self, b, root=0):
        _note("Bcast", *_spec(b if isinstance(b, (list, tuple)) else [b]))
        return super().Bcast(b, root)

    def Alltoallv(self, s, r):
        _note("Alltoallv", *_spec(s), *_spec(r))
        return super().Alltoallv(s, r)

    def Isend(self, b, dest, tag=0):
        _note("Isend", *_spec(b))
        return super().Isend(b, dest, tag)

    def Irecv(self, b, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG):
        _note("Irecv", *_spec(b))
        return super().Irecv(b, source, tag)

    def Split(self, color=0, key=0):
        new = super().Split(color, key)
        return new if new == MPI.COMM_NULL else Counting(new)


class WatchedWin:
    """A store's window for a backend, every Get checked against the limit."""

    def __init__(self, win):
        self.win = win

    def Get(self, origin, rank, target=None):
        _note("Get", memoryview(origin[0]).nbytes, target[1] if target else 0)
        return self.win.Get(origin, rank, target)

    def __getattr__(self, name):
        return getattr(self.win, name)


def set_limit(value):
    if collectives is not None:
        collectives.MAX_COUNT = value


base = World.detect()
check(base.size % 2 == 0, "run on an even number of ranks")
comm = Counting(base.comm)
world = World(comm, base.rank, base.size, base.node_of, base.local_rank, base.local_size)
half = world.size // 2
two_nodes = World(comm, world.rank, world.size, np.arange(world.size) // half,
                  world.rank % half, half)  # the ranks of one host as 2 nodes
lo, hi = block_bounds(N, world.size)[world.rank:world.rank + 2]
natoms = np.random.default_rng(5).integers(1, 40, N)
natoms[N // 2] = 4 * LIMIT  # one record far larger than the limit (12 B an atom)
samples = [{"sid": np.array([i]), "pos": np.full((int(natoms[i]), 3), i, np.float32)}
           for i in range(lo, hi)]


def store(w, mine, **kw):
    st = ShardStore.from_samples(w, mine, N, digests=True, **kw)
    opened = st.open_epoch
    st.open_epoch = lambda: WatchedWin(opened())
    return st


def batches(st, backend, batch_size):
    loader = MDLoader(st, batch_size=batch_size, seed=3, backend=backend, prefetch=1,
                      to_sample=lambda a: (int(a["sid"][0]), a["pos"].tobytes()), collate=list)
    loader.set_epoch(1)
    got = [b for b in loader]
    loader.close()
    return got


def snapshot(st):
    ids = np.arange(N)
    return (st.offsets[ids].copy(), st.nbytes[ids].copy(), st.owner_of(ids), st.digests.copy(),
            st.buffer.tobytes())


CASES = {"full": (world, dict(index="full"), ("onesided", "collective")),
         "compact": (world, dict(index="compact"), ()),
         "shared-2nodes": (two_nodes, dict(index="compact", index_share="node"), ("collective",))}
BATCH = {"onesided": 24, "collective": 16}


def run(name):
    w, kw, backends = CASES[name]
    st = store(w, samples, **kw)
    out = {"store": snapshot(st), "natoms": global_natoms(st, w)}
    for backend in backends:
        out[backend] = batches(st, backend, BATCH[backend])
    st.close()
    return out


def replica_copy():
    """The replica copy's broadcasts: a record buffer and a block's record sizes from rank 0 of
    each cross communicator (as ``replicate: copy`` sends them)."""
    from mdloader_plugin.store import replicate

    cross = comm.Split(world.rank % half, world.rank)
    root = cross.Get_rank() == 0
    rng = np.random.default_rng(world.rank % half)
    buf = rng.integers(0, 256, 5 * LIMIT + 7, dtype=np.uint8)
    got = buf.copy() if root else np.zeros_like(buf)
    replicate.bcast_records(cross, 0, got)
    sizes = rng.integers(0, 2**40, 3 * LIMIT + 1)
    if hasattr(replicate, "bcast_block"):
        head, got_sizes = replicate.bcast_block(cross, 0, ("n", {"k": 1}) if root else None,
                                                sizes if root else None)
    else:  # before: one pickled broadcast of the head and the sizes (store/shard.py)
        head, got_sizes = cross.bcast((("n", {"k": 1}), sizes) if root else None, 0)
    cross.Free()
    check(np.array_equal(got, buf) and np.array_equal(got_sizes, sizes)
          and head == ("n", {"k": 1}), "replica copy differs from the root's")
    return (got, got_sizes)


set_limit(2**31 - 1)
want = run("full")  # one call each, as the library made them before the limit
want_copy = replica_copy()
set_limit(LIMIT)
WATCH["on"] = True
got = {name: run(name) for name in CASES}
got_copy = replica_copy()
WATCH["on"] = False
check(not OVER, f"calls above the limit {LIMIT}: " + ", ".join(
    f"{call} carried {big}" for call, big in sorted(OVER.items())))
for name, out in got.items():  # every index kind gives the full index's bytes (index_equal.py)
    for part, (a, b) in enumerate(zip(want["store"], out["store"])):
        check(a == b if isinstance(a, bytes) else np.array_equal(a, b),
              f"{name}: part {part} of the store differs from the uncut one")
    check(np.array_equal(out["natoms"], want["natoms"])
          and np.array_equal(out["natoms"], natoms), f"{name}: atom counts differ")
    for backend in CASES[name][2]:
        check(out[backend] == want[backend], f"{name} {backend}: batches differ from the uncut")
check(all(np.array_equal(a, b) for a, b in zip(got_copy, want_copy)), "replica copy differs")
for call in ("Allgatherv", "Bcast", "Get", "Alltoallv", "Isend", "Irecv"):
    check(SEEN.get(call, 0) > 0, f"no {call} was seen: the test does not reach it")
if world.rank == 0:
    print("big_counts ok", dict(sorted(SEEN.items())), flush=True)
base.close()
