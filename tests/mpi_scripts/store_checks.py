"""ShardStore, its index and its replica copies on real ranks.

Usage: store_checks.py CHECK[,CHECK...] [ARGS...], CHECK one of samples | file (ARGS: PATH N) |
few (ARGS: PATH) | shared | replicate; several checks run in this order in one launch and each
prints its ``<check> ok`` line (the ARGS of file and few in the order of the checks).

``samples``/``file``: every rank's records are the codec bytes of exactly its block of the
synthetic graphs (seed 7), the global index names every sample's owner, offset and size, the
memory report adds up, close twice is harmless and a closed store refuses reads. ``few``: a file
with fewer samples than ranks stops every rank with one agreed line. ``shared``: the node-shared
index equals the per-rank one, on one node and on two emulated nodes, and each rank counts
``1 / ranks_per_node`` of one copy. ``replicate``: the cross-group communicator and the chunked
broadcast of a record buffer.
"""

import sys
from dataclasses import replace

import numpy as np
from mpi4py import MPI

from checks import check
from mdloader_plugin.core.blocks import block_bounds, exclusive_offsets
from mdloader_plugin.core.errors import MDLoaderError
from mdloader_plugin.mpi import groups
from mdloader_plugin.mpi.world import World
from mdloader_plugin.records import codec
from mdloader_plugin.sources import synth
from mdloader_plugin.store import replicate
from mdloader_plugin.store.index_build import allgather_blocks, build_index
from mdloader_plugin.store.shard import ShardStore

modes = sys.argv[1].split(",")
args = sys.argv[2:]  # taken in order by the checks that have arguments
world = World.detect()
rank, size = world.rank, world.size


def check_store(st, graphs, digests=False):
    n = len(graphs)
    bounds = block_bounds(n, size)
    lo, hi = int(bounds[rank]), int(bounds[rank + 1])
    check(st.num_samples == n and st.local_range == (lo, hi), (st.num_samples, st.local_range))
    check(st.block_starts.tolist() == bounds.tolist(), st.block_starts.tolist())
    for i in range(lo, hi):
        check(np.array_equal(st.local_record(i), codec.encode(graphs[i])),
              f"sample {i}: stored bytes differ from the codec encoding")
    sizes = np.array([codec.record_size(g) for g in graphs], dtype=np.int64)
    ids = np.arange(n)
    check(np.array_equal(st.nbytes[ids], sizes), "global sizes differ")
    want_offs = np.concatenate([exclusive_offsets(sizes[bounds[r]:bounds[r + 1]])
                                for r in range(size)])
    check(np.array_equal(st.offsets[ids], want_offs), "global offsets differ")
    check(np.array_equal(st.owner_of(ids), np.repeat(np.arange(size), np.diff(bounds))),
          "owners differ")
    rep = st.memory_report()
    idx = st.index.memory_bytes()["index_bytes"] + (8 * n if digests else 0)
    want = {"records_bytes": int(sizes[lo:hi].sum()), "samples_local": hi - lo,
            "samples_global": n, "dataset_bytes": int(sizes.sum()), "index_bytes": idx,
            "index_shared_bytes": 0}
    check({k: rep[k] for k in want} == want, f"memory_report {rep}, expected {want}")
    other = (hi % n) if hi - lo < n else None
    if other is not None:
        try:
            st.local_record(other)
            check(False, f"sample {other} of another rank was read")
        except IndexError as e:
            check(str(e) == f"sample {other} is not on this rank (owns {lo}..{hi - 1})", str(e))


def check_closed(st):
    st.close()
    st.close()  # twice is harmless
    for what, call in (("local_record", lambda: st.local_record(st.local_range[0])),
                       ("open_epoch", st.open_epoch)):
        try:
            got = call()
            check(False, f"{what} on a closed store returned {got!r}")
        except ValueError as e:
            check("the store is closed" in str(e), f"{what}: {e}")


if "samples" in modes:
    graphs = list(synth.generate("hydragnn", 7, 0, 31))
    lo, hi = block_bounds(31, size)[rank:rank + 2]
    for digests in (False, True):
        st = ShardStore.from_samples(world, graphs[lo:hi], 31, digests=digests)
        check_store(st, graphs, digests)
        check((st.digests is not None) == digests, "digests")
        check(st.window is not None and st.open_epoch() is st.window, "window")
        st.close_epoch()
        check_closed(st)
    # allgather_blocks: every rank's block in rank order, and a wrong total is an internal error
    local = np.arange(lo, hi, dtype=np.int32) * 3
    check(allgather_blocks(world, local, 31).tolist() == [3 * i for i in range(31)], "allgather")
    try:
        allgather_blocks(world, local, 32)
        check(False, "a wrong total was accepted")
    except AssertionError as e:
        check("ranks hold 31 of 32 samples" in str(e) and "please report" in str(e), str(e))
    if rank == 0:
        print("samples ok", flush=True)

if "file" in modes:
    path, n = args.pop(0), int(args.pop(0))
    graphs = list(synth.generate("hydragnn", 7, 0, n))
    st = ShardStore.from_file(world, path)
    check_store(st, graphs)
    check(st.meta["label"] == "trainset" and st.meta["replicate"] == "read", st.meta)
    total = world.comm.allreduce(st.meta["bytes_read"])
    check(st.meta["bytes_read_all_ranks"] == total > 0, (st.meta["bytes_read_all_ranks"], total))
    check_closed(st)
    if rank == 0:
        print("file ok", flush=True)

if "few" in modes:
    try:
        ShardStore.from_file(world, args.pop(0))
        check(False, "a store of 2 samples on 3 ranks was built")
    except MDLoaderError as e:
        check(getattr(e, "agreed", False), "not agreed")
        check(str(e).endswith(": trainset has 2 samples but the job has 3 ranks; run with at "
                              "most 2 ranks"), str(e))
    if rank == 0:
        print("few ok", flush=True)

if "shared" in modes:
    graphs = list(synth.generate("hydragnn", 7, 0, 203))
    sizes = np.array([codec.record_size(g) for g in graphs], dtype=np.int64)
    two_nodes = replace(world, node_of=np.repeat(np.arange(2), size // 2),
                        local_rank=rank % (size // 2), local_size=size // 2)
    for w, per_node in ((world, size), (two_nodes, size // 2)):
        bounds = block_bounds(203, size)
        mine = sizes[bounds[rank]:bounds[rank + 1]]
        private = build_index(w, mine, bounds, "compact", "rank")
        shared = build_index(w, mine, bounds, "compact", "node")
        ids = np.arange(203)
        for key in ("nbytes_of", "offsets_of", "owner_of"):
            check(np.array_equal(getattr(shared, key)(ids), getattr(private, key)(ids)),
                  f"{per_node} ranks a node: {key} differs")
        check(np.array_equal(shared.nbytes_of(ids), sizes), "sizes")
        p, s = private.memory_bytes(), shared.memory_bytes()
        arrays = private.codes.nbytes + private.chk.nbytes
        small = private.block_starts.nbytes + private.block_cum.nbytes
        check(shared.ranks_sharing == per_node, shared.ranks_sharing)
        check(s["index_shared_bytes"] == arrays and p["index_shared_bytes"] == 0, (p, s))
        check(s["index_bytes"] == arrays // per_node + small, (s, arrays, small))
        # one copy a node: a code written by the node's last rank is seen by its first
        node = w.comm.Split(int(w.node_of[rank]), key=rank)
        if node.rank == node.size - 1:
            shared.codes[0] = shared.codes[0] + 1
        node.Barrier()
        bumped = int(shared.codes[0])
        node.Barrier()
        check(bumped == int(private.codes[0]) + 1, f"codes[0] {bumped}: not one copy a node")
        node.Free()
        shared.close()
        shared.close()
        check(shared.codes is None, "close kept the window")
    if rank == 0:
        print("shared ok", flush=True)

if "replicate" in modes:
    group = groups.make(world, 2)
    comm, root = replicate.cross(world, group)
    check((comm.size, comm.rank, root) == (group.count, group.index, group.rank % group.count),
          (comm.size, comm.rank, root))
    replicate.CHUNK = 7  # several broadcasts a buffer
    for nbytes in (0, 5, 7, 50):
        want = (np.arange(nbytes) * 31 + group.rank).astype(np.uint8)
        buf = want.copy() if comm.rank == root else np.zeros(nbytes, np.uint8)
        replicate.bcast_records(comm, root, buf)
        check(np.array_equal(buf, want), f"{nbytes} bytes: copy differs")
    comm.Free()
    group.close()
    if rank == 0:
        print("replicate ok", flush=True)
