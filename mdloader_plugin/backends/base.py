"""The backend interface and the byte-gathering helpers both backends share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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


class Backend:
    """Moves the records a step needs onto the rank that needs them.

    Subclasses implement ``_fetch(plan) -> Fetched``; ``fetch`` checks the plan's shape. A backend
    is built once per loader (collectively) and ``close()``d once (collectively).
    """

    name = "base"

    def __init__(self, store, world):
        self.store = store
        self.world = world
        self.rank = 0 if world is None else world.rank
        self.size = 1 if world is None else world.size

    def fetch(self, plan: np.ndarray) -> Fetched:
        if plan.ndim != 2 or plan.shape[0] != self.size:
            raise AssertionError(f"Internal error: plan shape {plan.shape} for {self.size} ranks")
        return self._fetch(plan)

    def _fetch(self, plan: np.ndarray) -> Fetched:
        raise NotImplementedError

    def close(self) -> None:
        """Release MPI resources (collective)."""


def gather_local(buf: np.ndarray, src_offsets: np.ndarray, nbytes: np.ndarray,
                 out: np.ndarray, dst_offsets: np.ndarray) -> None:
    """Copy records ``buf[src:src+n]`` to ``out[dst:dst+n]`` (a memcpy a record)."""
    for s, n, d in zip(src_offsets.tolist(), nbytes.tolist(), dst_offsets.tolist()):
        out[d:d + n] = buf[s:s + n]


def exclusive_cumsum(a: np.ndarray) -> np.ndarray:
    out = np.zeros(a.size, dtype=np.int64)
    if a.size > 1:
        np.cumsum(a[:-1], out=out[1:])
    return out
