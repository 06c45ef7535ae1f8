"""Building the global index (collective): every rank's sizes of its own block -> the index.

Each rank encodes its own block's sizes; an ``Allgatherv`` joins the blocks in rank order
(``index_share: rank``), or the ranks of a node fill one shared-memory copy
(``index_share: node``, :mod:`.shared_index`). The index types themselves are in :mod:`.index`.
"""

from __future__ import annotations

import math

import numpy as np

from ..core.blocks import exclusive_offsets
from ..mpi.collectives import allgather_counts, allgatherv_big
from .index import CompactIndex, FullIndex, code_dtype, code_params, default_every, encode
from .shared_index import build_shared
from ..core.errors import internal


def build_index(world, sizes: np.ndarray, block_starts: np.ndarray, kind: str = "compact",
                share: str = "rank", every: int | None = None):
    """Collective. The global index from every rank's sizes of its own block.

    `kind`: ``"compact"`` or ``"full"``; `share`: ``"rank"`` (a private copy) or ``"node"``
    (compact only: one copy a node in shared memory, :mod:`.shared_index`)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    n = int(block_starts[-1])
    if kind == "full":
        offs = allgather_blocks(world, exclusive_offsets(sizes), n)
        return FullIndex(block_starts, offs, allgather_blocks(world, sizes, n))
    every = default_every(n) if every is None else int(every)
    base, unit, dtype = _agree_code(world, sizes)
    codes = encode(sizes, base, unit, dtype)
    # Every rank takes the same branch (build_shared is collective): whether SOME node holds
    # several ranks, not whether this rank's does (uneven nodes: srun -N2 -n6, 3+1 ranks).
    if share == "node" and world is not None and int(np.bincount(world.node_of).max()) > 1:
        return build_shared(world, codes, block_starts, base, unit, every)
    return CompactIndex(block_starts, allgather_blocks(world, codes, n), base, unit, every)


def _agree_code(world, sizes: np.ndarray) -> tuple[int, int, np.dtype]:
    lo, g, hi = code_params(sizes)
    if world is not None and world.size > 1:
        parts = world.comm.allgather((lo, g, hi))
        lo = min(p[0] for p in parts)
        g = math.gcd(*(p[1] for p in parts))
        hi = max(p[2] for p in parts)
    unit = g or 1
    return lo, unit, code_dtype((hi - lo) // unit)


def allgather_blocks(world, local: np.ndarray, num_samples: int,
                     out: np.ndarray | None = None) -> np.ndarray:
    """Every rank's block of a per-sample column, concatenated in rank order (``Allgatherv``s
    of at most ``MDLOADER_MPI_MAX_COUNT`` elements and bytes each:
    :func:`~mdloader_plugin.mpi.collectives.allgatherv_big`)."""
    if world is None or world.size == 1:
        if local.size != num_samples:
            raise internal("one rank must hold every sample")
        return local
    counts = allgather_counts(world.comm, int(local.size))
    if int(counts.sum()) != num_samples:
        raise internal(f"ranks hold {int(counts.sum())} of {num_samples} samples")
    glob = np.empty(num_samples, dtype=local.dtype) if out is None else out
    return allgatherv_big(world.comm, local, glob, counts)
