"""How the replica groups get their copies: every group reads the file, or it is read once and
copied across groups in memory.

With ``P / W`` replica groups (:mod:`mdloader_plugin.mpi.groups`) every group holds the whole data
set, so block ``i`` (of ``W``) lives on rank ``i`` of every group. Two ways to fill them:

- ``read``: every rank reads its block from the file; the file is read ``P / W`` times in all.
- ``copy``: the file is read once in total: block ``i`` is read by rank ``i`` of group
  ``i mod (P / W)`` (the reads spread over the groups, so over the nodes, and every node's link
  sends about as much as it receives), encoded into its store buffer, and broadcast in chunks
  of ``CHUNK`` bytes over a communicator linking rank ``i`` of every group (:func:`cross`).
  The receivers allocate their buffer from the broadcast record sizes and never open the file.

Both fill byte-identical buffers (the records are the same codec bytes). ``resolve`` picks the
mode: an explicit ``read``/``copy``, or ``auto`` (the default): ``copy`` when the whole job is
on one node (the copy is a shared-memory broadcast: measured 1.2x faster than every group
reading and decoding the file), ``read`` when it spans nodes (across the emulated cluster's
links, with the file in the page cache, reading was 1.2x faster at 1gbit and 1.8x at 200mbit;
on a machine whose file system is slow next to its interconnect, set ``copy``). Figures:
``docs/replica-groups.md``.
"""

from __future__ import annotations

import numpy as np

from ..core.errors import ConfigError
from ..mpi.collectives import bcast_array, bcast_big

MODES = ("read", "copy")
CHUNK = 1 << 28  # bytes a broadcast at most (and MDLOADER_MPI_MAX_COUNT, if lower)


def resolve(mode, num_nodes: int = 1) -> str:
    """``read`` or ``copy`` from a user's value; None/``auto``: ``copy`` on one node, else
    ``read`` (module docstring)."""
    if mode is None or str(mode).strip().lower() in ("", "auto"):
        return "copy" if num_nodes <= 1 else "read"
    m = str(mode).strip().lower()
    if m not in MODES:
        raise ConfigError(f"replicate: expected read, copy or auto, got {mode!r}")
    return m


def cross(world, group):
    """Collective over the world. The communicator linking rank ``group.rank`` of every group
    (its rank = the group's index), and the index of the group whose rank reads this block."""
    comm = world.comm.Split(color=group.rank, key=group.index)
    return comm, group.rank % group.count


def bcast_records(comm, root: int, buf: np.ndarray) -> None:
    """Collective over `comm`: `root`'s filled record buffer into every other rank's `buf`."""
    bcast_big(comm, buf, root, limit=CHUNK)


def bcast_block(comm, root: int, head, sizes) -> tuple:
    """Collective over `comm`: `root`'s ``head`` (a few numbers and the block's metadata, pickled)
    and its block's record `sizes` (int64, per sample: a buffer broadcast, never pickled)."""
    head = comm.bcast(head if comm.Get_rank() == root else None, root)
    return head, bcast_array(comm, sizes if comm.Get_rank() == root else None, root)
