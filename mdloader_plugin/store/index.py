"""The global index: for every sample of the job, its owner rank, offset and record length.

Every rank must be able to find any sample without asking (the one-sided backend reads it, the
collective backend computes its receive counts from it), so every rank holds an index of all
``N`` samples. Two representations answer the same questions (``nbytes[ids]``, ``offsets[ids]``,
``owner_of(ids)``) and serve byte-identical batches:

``compact`` (default), about ``w + 8/K`` bytes a sample:

* **sizes** as codes ``(size - base) // unit`` in the narrowest unsigned type that holds the
  largest (``w`` = 1, 2, 4 or 8 bytes). ``base`` is the smallest record and ``unit`` the gcd of
  all sizes; codec records are multiples of 8 bytes, so any spread of sizes below 512 KiB fits
  2 bytes a sample, below 255*8 B one byte.
* **offsets** derived, never stored: ``cum(i)``, the bytes of all samples before ``i``, is kept
  at every ``K``-th id (int64, ``8/K`` bytes a sample), and the offset of ``i`` in its owner's
  buffer is ``cum(i) - cum(first id of the owner's block)`` with ``cum(i) = chk[i // K] +
  base * (i mod K) + unit * sum(codes[K * (i // K) : i])``. A lookup reads at most ``K - 1``
  codes (a vectorised gather, ~1 us a sample at K = 64).
* **owners** from the ``P + 1`` block boundaries (rank ``r`` owns ``[b[r], b[r + 1])``).

``K`` is 64 above ``DENSE_UP_TO`` (4M) samples and 1 below: then every sample's offset in its
owner's buffer is kept (at most 42 MB) and a lookup is one gather, as fast as the full index: a
step of a small data set must not pay ~0.1 ms of ragged gathers that buy nothing.

``full``: int64 offset and length of every sample (16 bytes a sample), the representation before
the compact index; kept as the reference the tests compare against and for the benchmark's
"before" column.

Optionally the compact arrays live once per node in an MPI shared-memory window
(``share="node"``): each rank then counts ``(w + 8/K) * N / ranks_per_node`` bytes. Digests, when
asked for, stay a private uint64 per sample (8 bytes a sample).

Exchange at load: one ``Allgatherv`` of the codes (``w`` bytes a sample; once per node with a
shared index) plus three small reductions, instead of 16 bytes a sample.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..core.blocks import owner_of
from ..core.errors import ConfigError
from ..core.options import INDEX_KINDS, INDEX_SHARES

KINDS = INDEX_KINDS  # the settings table's choices (core/options.py)
SHARES = INDEX_SHARES
CHECKPOINT_EVERY = 64  # K: a checkpoint costs 8/K bytes a sample, a lookup reads < K codes
DENSE_UP_TO = 1 << 22  # up to this many samples K = 1: 10 B a sample, a lookup is one gather
_CHUNK = 1 << 20       # samples a chunk when a whole column is materialised or reduced


class Column:
    """Read-only array-like view of one index column (int64), computed on demand.

    ``col[ids]`` (an int array), ``col[i]``, ``col[a:b]``, ``len``/``size``, ``sum``/``mean``
    and ``np.asarray(col)`` (which materialises ``N`` int64: small data sets and tests only)."""

    dtype = np.dtype(np.int64)
    ndim = 1

    def __init__(self, fn: Callable[[np.ndarray], np.ndarray], n: int,
                 total: Callable[[], int] | None = None):
        self._fn, self.size, self._total = fn, int(n), total

    @property
    def shape(self) -> tuple[int]:
        return (self.size,)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key):
        if type(key) is np.ndarray and key.dtype.kind in "iu":  # the hot path: a step's ids
            return self._fn(key)  # numpy's own gather rejects ids out of range
        if isinstance(key, (int, np.integer)):
            i = int(key) + (self.size if key < 0 else 0)
            if not 0 <= i < self.size:
                raise IndexError(f"index {key} out of range for {self.size} samples")
            return self._fn(np.array([i], dtype=np.int64))[0]
        if isinstance(key, slice):
            return self._fn(np.arange(self.size, dtype=np.int64)[key])
        return self._fn(np.asarray(key, dtype=np.int64))

    def __array__(self, dtype=None, copy=None):
        out = np.empty(self.size, dtype=np.int64)
        for lo in range(0, self.size, _CHUNK):
            hi = min(lo + _CHUNK, self.size)
            out[lo:hi] = self._fn(np.arange(lo, hi, dtype=np.int64))
        return out if dtype is None else out.astype(dtype)

    def copy(self) -> np.ndarray:
        return np.asarray(self)

    def sum(self, *args, **kwargs):
        """The column's total (no materialising for sizes); numpy's arguments materialise."""
        if args or any(v is not None for v in kwargs.values()) or self._total is None:
            return np.asarray(self).sum(*args, **kwargs)
        return self._total()

    def mean(self, *args, **kwargs):
        if args or any(v is not None for v in kwargs.values()):
            return np.asarray(self).mean(*args, **kwargs)
        return self.sum() / self.size


class FullIndex:
    """int64 offset and length of every sample (16 bytes a sample): the reference index."""

    kind = "full"

    def __init__(self, block_starts: np.ndarray, offsets: np.ndarray, nbytes: np.ndarray):
        self.block_starts, self.offsets, self.nbytes = block_starts, offsets, nbytes
        self.num_samples = int(offsets.size)

    def owner_of(self, ids: np.ndarray) -> np.ndarray:
        return owner_of(self.block_starts, ids)

    def memory_bytes(self) -> dict:
        return {"index_bytes": int(self.offsets.nbytes + self.nbytes.nbytes
                                   + self.block_starts.nbytes), "index_shared_bytes": 0}

    def size_sample(self, limit: int = 1 << 20) -> np.ndarray:
        return np.asarray(self.nbytes[_spread(self.num_samples, limit)])

    def describe(self) -> str:
        return "full (int64 offset + length)"


class CompactIndex:
    """Coded sizes plus offset checkpoints (see the module doc). Build with
    :func:`~mdloader_plugin.store.index_build.build_index`.

    Args:
        block_starts: ``[P + 1]`` first id of every rank's block.
        codes: ``[N]`` ``(size - base) // unit``, unsigned.
        base: the code's offset back to bytes (``size = base + code * unit``).
        unit: the code's scale back to bytes.
        every: K, ids between checkpoints.
        chk: ``[ceil(N / K)]`` int64 ``cum(K * j)``, or None to compute it from `codes`.
        ranks_sharing: ranks of a node that share `codes`/`chk` in a node-shared window
            (their bytes are counted once a node).
    """

    kind = "compact"

    def __init__(self, block_starts: np.ndarray, codes: np.ndarray, base: int, unit: int,
                 every: int | None = None, chk: np.ndarray | None = None,
                 ranks_sharing: int = 1):
        self.block_starts, self.codes = block_starts, codes
        self.num_samples = int(codes.size)
        every = default_every(self.num_samples) if every is None else every
        self.base, self.unit, self.every = int(base), int(unit), int(every)
        self.chk = checkpoints(codes, base, unit, every, block_starts) if chk is None else chk
        self.ranks_sharing = int(ranks_sharing)
        self._total = int(self.num_samples * self.base + self.unit * _code_sum(codes))
        self.block_cum = np.zeros(block_starts.size, np.int64) if every == 1 else self._cum(
            np.minimum(block_starts, self.num_samples))
        self.nbytes = Column(self.nbytes_of, self.num_samples, self.total_bytes)
        self.offsets = Column(self.offsets_of, self.num_samples)

    def owner_of(self, ids: np.ndarray) -> np.ndarray:
        return owner_of(self.block_starts, ids)

    def nbytes_of(self, ids: np.ndarray) -> np.ndarray:
        out = self.codes[ids].astype(np.int64)
        out *= self.unit
        out += self.base
        return out

    def offsets_of(self, ids: np.ndarray) -> np.ndarray:
        if self.every == 1:  # dense: chk holds the offsets themselves
            return self.chk[ids]
        flat = np.asarray(ids, dtype=np.int64).reshape(-1)
        return (self._cum(flat) - self.block_cum[self.owner_of(flat)]).reshape(np.shape(ids))

    def _cum(self, ids: np.ndarray) -> np.ndarray:
        """Bytes of all samples before each of `ids` (an id may equal N): the checkpoint before
        it plus the codes in between, gathered as one ragged run (no per-id loop)."""
        ids = np.asarray(ids, dtype=np.int64)
        j, r = np.divmod(ids, self.every)
        out = np.full(ids.shape, self._total, dtype=np.int64)
        has = j < self.chk.size
        out[has] = self.chk[j[has]]
        r = np.where(has, r, 0)
        ends = np.cumsum(r)
        if ids.size and ends[-1]:
            firsts = ends - r
            pos = np.repeat(ids - r - firsts, r) + np.arange(ends[-1], dtype=np.int64)
            run = np.zeros(ends[-1] + 1, dtype=np.int64)
            np.cumsum(self.codes[pos], dtype=np.int64, out=run[1:])
            out += r * self.base + (run[ends] - run[firsts]) * self.unit
        return out

    def total_bytes(self) -> int:
        return self._total

    def memory_bytes(self) -> dict:
        """This rank's share: a node-shared index counts ``1 / ranks_sharing`` of its arrays."""
        arrays = self.codes.nbytes + self.chk.nbytes
        small = self.block_starts.nbytes + self.block_cum.nbytes
        return {"index_bytes": int(arrays // self.ranks_sharing + small),
                "index_shared_bytes": int(arrays) if self.ranks_sharing > 1 else 0}

    def size_sample(self, limit: int = 1 << 20) -> np.ndarray:
        """Sizes of up to `limit` evenly spread samples (all of them when N <= limit): enough
        for the cost model's mean and spread without materialising N sizes."""
        return self.nbytes_of(_spread(self.num_samples, limit))

    def describe(self) -> str:
        where = f", one copy per node ({self.ranks_sharing} ranks)" if self.ranks_sharing > 1 \
            else ""
        return (f"compact ({self.codes.dtype.itemsize} B size code + checkpoint every "
                f"{self.every}{where})")


def _spread(n: int, limit: int) -> np.ndarray:
    if n <= limit:
        return np.arange(n, dtype=np.int64)
    return (np.arange(limit, dtype=np.int64) * n) // limit


def _code_sum(codes: np.ndarray) -> int:
    return int(sum(int(codes[lo:lo + _CHUNK].sum(dtype=np.int64))
                   for lo in range(0, codes.size, _CHUNK)))


def code_dtype(max_code: int) -> np.dtype:
    """The narrowest unsigned dtype that holds `max_code`."""
    for dt in (np.uint8, np.uint16, np.uint32):
        if max_code <= np.iinfo(dt).max:
            return np.dtype(dt)
    return np.dtype(np.uint64)


def code_params(sizes: np.ndarray) -> tuple[int, int, int]:
    """``(min, gcd, max)`` of one rank's record sizes (gcd 0 and min/max neutral if empty)."""
    if sizes.size == 0:
        return np.iinfo(np.int64).max, 0, 0
    return int(sizes.min()), int(np.gcd.reduce(sizes)), int(sizes.max())


def encode(sizes: np.ndarray, base: int, unit: int, dtype) -> np.ndarray:
    """Size codes ``(size - base) // unit`` as `dtype`."""
    return ((sizes - base) // unit).astype(dtype)


def checkpoints(codes: np.ndarray, base: int, unit: int, every: int,
                block_starts: np.ndarray) -> np.ndarray:
    """``cum(K * j)`` for ``j = 0 .. ceil(N / K) - 1`` (exclusive prefix sums of chunk bytes);
    with ``K = 1`` each sample's offset in its owner's buffer (the sums restarted at every
    block), so a dense lookup is one gather."""
    n = codes.size
    starts = np.arange(0, n, every, dtype=np.int64)
    chk = np.zeros(starts.size, dtype=np.int64)
    if starts.size > 1:
        sums = np.add.reduceat(codes, starts, dtype=np.int64)[:-1]  # full chunks only
        np.cumsum(sums * unit + every * base, out=chk[1:])
    if every == 1:
        for lo, hi in zip(block_starts[:-1].tolist(), block_starts[1:].tolist()):
            chk[lo:hi] -= chk[lo] if hi > lo else 0
    return chk


def default_every(num_samples: int) -> int:
    """K for a data set of `num_samples` (see the module doc)."""
    return 1 if num_samples <= DENSE_UP_TO else CHECKPOINT_EVERY


def bound_bytes(num_samples: int, digests: bool = False, kind: str = "compact",
                ranks_sharing: int = 1) -> int:
    """An upper bound of the index's bytes on one rank before the sizes are known (the memory
    budget's figure): compact codes are taken as 4 bytes (any spread of sizes below 32 GiB)."""
    if kind == "full":
        per = 16.0
    else:
        per = (4 + 8 / default_every(num_samples)) / max(ranks_sharing, 1)
    return int(math.ceil(num_samples * (per + (8 if digests else 0))))


def exact_bytes(sizes: np.ndarray, shards: int, kind: str = "compact",
                ranks_sharing: int = 1) -> int:
    """The bytes of the index one rank holds when records of `sizes` (every sample, in id
    order) are sharded over `shards` ranks: what ``store.index_build.build_index`` builds, from the
    sizes alone (``mdloader plan``; :func:`bound_bytes` is the figure before the sizes are
    known)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    n, small = int(sizes.size), 8 * (int(shards) + 1)
    if kind == "full":
        return 16 * n + small  # offsets and sizes, int64
    lo, g, hi = code_params(sizes)
    codes = n * code_dtype((hi - lo) // (g or 1)).itemsize if n else 0
    chk = 8 * -(-n // default_every(n))
    return (codes + chk) // max(int(ranks_sharing), 1) + 2 * small


def check_choice(kind: str, share: str) -> None:
    """A bad ``index``/``index_share`` is a ConfigError naming the valid choices."""
    if kind not in KINDS:
        raise ConfigError(f"index must be one of {', '.join(KINDS)}; got {kind!r}")
    if share not in SHARES:
        raise ConfigError(f"index_share must be one of {', '.join(SHARES)}; got {share!r}")
    if kind == "full" and share == "node":
        raise ConfigError("index_share='node' needs index='compact' (the full index is "
                          "private to each rank)")
