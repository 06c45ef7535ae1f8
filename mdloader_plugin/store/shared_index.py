"""One copy of the compact global index per node, in an MPI shared-memory window.

The ranks of a node (``MPI_COMM_TYPE_SHARED``) map one window allocated by their leader
(``MPI_Win_allocate_shared``): the size codes ``[N]`` and the offset checkpoints ``[N / K]`` of
:class:`~.index.CompactIndex`, read with plain loads. Each rank writes its own block's codes;
the leaders then exchange their nodes' blocks, one broadcast a node over a communicator of
leaders (message: that node's share, ``w * N / nodes`` bytes), and each leader computes the
checkpoints. A rank's share of the index is ``(w + 8/K) * N / ranks_per_node`` bytes.

Load-time traffic: on the leaders ``w * N`` bytes each (what a node needs), nothing between ranks
of a node beyond the window's synchronisation.
"""

from __future__ import annotations

import numpy as np

from ..mpi.collectives import bcast_big
from .index import CompactIndex, checkpoints


def build_shared(world, codes_local: np.ndarray, block_starts: np.ndarray, base: int,
                 unit: int, every: int) -> CompactIndex:
    """Collective over `world`. The node-shared :class:`CompactIndex` (it owns the window:
    ``index.close()`` frees it, collectively)."""
    from mpi4py import MPI

    node = world.comm.Split(int(world.node_of[world.rank]), key=world.rank)  # as World found
    n, dtype = int(block_starts[-1]), codes_local.dtype
    nchk = -(-n // every)
    head = -(-n * dtype.itemsize // 8) * 8
    total = head + 8 * nchk
    win = MPI.Win.Allocate_shared(max(total, 8) if node.rank == 0 else 0, 1, comm=node)
    mem, _ = win.Shared_query(0)
    raw = np.frombuffer(mem, dtype=np.uint8, count=max(total, 8))
    codes = raw[:n * dtype.itemsize].view(dtype)
    chk = raw[head:head + 8 * nchk].view(np.int64)
    win.Fence()
    lo, hi = int(block_starts[world.rank]), int(block_starts[world.rank + 1])
    codes[lo:hi] = codes_local
    win.Fence()
    leaders = world.comm.Split(0 if node.rank == 0 else MPI.UNDEFINED, key=world.rank)
    if leaders != MPI.COMM_NULL:
        _exchange_between_nodes(world, leaders, codes, block_starts)
        chk[:] = checkpoints(codes, base, unit, every, block_starts)
        leaders.Free()
    win.Fence()
    index = CompactIndex(block_starts, codes, base, unit, every, chk=chk,
                         ranks_sharing=node.size)
    index.close = _closer(win, node, index)
    return index


def _exchange_between_nodes(world, leaders, codes: np.ndarray, block_starts: np.ndarray) -> None:
    """Leaders only: every node's blocks to every other node, one broadcast a node (packed; in
    ``Bcast``s of at most ``MDLOADER_MPI_MAX_COUNT`` bytes:
    :func:`~mdloader_plugin.mpi.collectives.bcast_big`)."""
    node_of = np.asarray(world.node_of)
    nodes = np.unique(node_of)  # a replica group's nodes need not start at 0
    for k in range(leaders.size):  # leaders are ordered by rank, as node indices are
        ranks = np.flatnonzero(node_of == nodes[k])
        spans = [(int(block_starts[r]), int(block_starts[r + 1])) for r in ranks]
        if nodes[k] == node_of[world.rank]:
            packed = np.concatenate([codes[a:b] for a, b in spans])
        else:
            packed = np.empty(sum(b - a for a, b in spans), dtype=codes.dtype)
        bcast_big(leaders, packed, root=k)
        at = 0
        for a, b in spans:
            codes[a:b] = packed[at:at + b - a]
            at += b - a


def _closer(win, node, index):
    def close() -> None:
        if index.codes is not None:
            index.codes = index.chk = None
            win.Free()
            node.Free()
    return close
