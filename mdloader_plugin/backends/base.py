"""The backend interface and the byte-gathering helpers both backends share."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from ..core.blocks import exclusive_offsets
from ..core.errors import internal
from ..sampling.planner import StepPlan
from ..records import kernels

_GROW = 1.1           # a new buffer has room for steps this much larger (a step's bytes vary
                      # by a few % at batch >= 32: the sum of many random record sizes)
_ROUND = 1 << 20      # capacities are whole MiB


@dataclass
class Fetched:
    """This rank's records of one step: record ``i`` is ``buf[offsets[i]:offsets[i]+nbytes[i]]``
    and belongs to ``ids[i]`` (plan order)."""

    ids: np.ndarray
    buf: np.ndarray
    offsets: np.ndarray
    nbytes: np.ndarray

    def record(self, i: int) -> np.ndarray:
        o = int(self.offsets[i])
        return self.buf[o:o + int(self.nbytes[i])]


class BufferPool:
    """Step buffers reused from step to step: a fresh multi-MiB buffer a step costs a page fault
    every 4 KiB on first touch (~2x the copy itself at 18 MB) and leaves the allocator holding
    freed blocks of every size it has seen. A buffer comes back only when nothing refers to it
    any more (:meth:`give`); at most `slots` wait, the rest are freed."""

    def __init__(self, slots: int = 2):
        self._free: list[np.ndarray] = []
        self._slots, self._lock = slots, threading.Lock()

    def take(self, n: int) -> np.ndarray:
        """A uint8 array of `n` bytes (contents undefined)."""
        with self._lock:
            for i, b in enumerate(self._free):  # kept by ascending size: the first fit is the best
                if b.size >= n:
                    del self._free[i]
                    return b[:n]
        cap = -(-int(n * _GROW) // _ROUND) * _ROUND if n > _ROUND // 2 else n
        return np.empty(cap, dtype=np.uint8)[:n]

    def held_bytes(self) -> int:
        """Bytes of the buffers waiting for reuse."""
        with self._lock:
            return int(sum(b.nbytes for b in self._free))

    def give(self, buf: np.ndarray) -> None:
        """Return a buffer from :meth:`take` (no view of it may be alive)."""
        whole = buf.base if isinstance(buf.base, np.ndarray) else buf
        with self._lock:
            self._free.append(whole)
            self._free.sort(key=lambda b: b.size)
            del self._free[:max(0, len(self._free) - self._slots)]  # keep the largest


class Backend:
    """Moves the records a step needs onto the rank that needs them.

    Subclasses implement ``_fetch(plan) -> Fetched``; ``fetch`` checks the plan's shape. A backend
    is built once per loader (collectively) and ``close()``d once (collectively).
    """

    name = "base"

    def __init__(self, store, world):
        self.buffers = BufferPool(slots=1)  # receive buffers; the loader gives them back
        self.store = store
        self.world = world
        self.rank = 0 if world is None else world.rank
        self.size = 1 if world is None else world.size
        # bytes this rank received from other ranks, split by whether they crossed a node
        self.traffic = {"on_node": 0, "off_node": 0}

    def fetch(self, plan) -> Fetched:
        """This rank's records of a step: `plan` is this rank's
        :class:`~mdloader_plugin.sampling.planner.StepPlan` (its row, and its sends if known), or
        the whole ``[W, b]`` table of its group (the reference path: scanned, ``O(W b)``)."""
        if isinstance(plan, np.ndarray):
            if plan.ndim != 2 or plan.shape[0] != self.size:
                raise internal(f"plan shape {plan.shape} for {self.size} ranks")
            plan = StepPlan.from_table(plan, self.rank, *self.store.local_range)
        return self._fetch(plan)

    def _fetch(self, plan: StepPlan) -> Fetched:
        raise NotImplementedError

    def _count(self, from_rank: np.ndarray) -> None:
        """Add ``from_rank[r]`` bytes received from each rank ``r`` to :attr:`traffic`."""
        if self.world is None:
            return
        from_rank = np.asarray(from_rank, dtype=np.int64).copy()
        from_rank[self.rank] = 0
        off = self.world.node_of != self.world.node_of[self.rank]
        self.traffic["off_node"] += int(from_rank[off].sum())
        self.traffic["on_node"] += int(from_rank[~off].sum())

    def set_active(self, active: bool) -> None:
        """Whether this backend serves the coming steps (``auto`` keeps both backends while it
        probes): an inactive one must not change how fast the active one runs (rank-local)."""

    def close(self) -> None:
        """Release MPI resources (collective)."""


def gather_local(buf: np.ndarray, src_offsets: np.ndarray, nbytes: np.ndarray,
                 out: np.ndarray, dst_offsets: np.ndarray) -> None:
    """Copy records ``buf[src:src+n]`` to ``out[dst:dst+n]`` (a memcpy a record; in one
    compiled call with the GIL released when the kernels are built, :mod:`..records.kernels`)."""
    k = kernels.get()
    if k is not None and buf.dtype == out.dtype == np.uint8 and buf.ndim == out.ndim == 1 \
            and buf.flags.c_contiguous and out.flags.c_contiguous:
        if not k.copy_records(buf, np.ascontiguousarray(src_offsets, dtype=np.int64),
                        np.ascontiguousarray(nbytes, dtype=np.int64), out,
                        np.ascontiguousarray(dst_offsets, dtype=np.int64)):
            return
    src, dst = memoryview(buf).cast("B"), memoryview(out).cast("B")  # ~40% less per record
    for s, n, d in zip(src_offsets.tolist(), nbytes.tolist(), dst_offsets.tolist()):
        dst[d:d + n] = src[s:s + n]


exclusive_cumsum = exclusive_offsets  # the name the backends and benches use
