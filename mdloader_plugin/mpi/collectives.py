"""Collectives MDLoader builds on: a number reduced by a buffer ``Allreduce`` (never the pickled
one, which holds the GIL), an agreement on rank-local work before a collective, and the calls
that carry per-sample data, safe at any count.

Counts at scale. An MPI-3.1 library (Cray MPICH 8.1 among them) has no large-count calls: every
count and displacement is a C ``int``, and mpi4py raises for one of ``2**31`` or more. Data sets
of ``N >= 2**31`` samples, an index share of ``N / nodes >= 2**31``, a record buffer over 2 GiB
or a step moving 2 GiB reach that. Every call that carries per-sample data goes through this
module, which cuts it so that no count, displacement or message passes :func:`max_count`
elements **and** bytes (``MDLOADER_MPI_MAX_COUNT``, default ``2**31 - 1``; a test lowers it to
run the cut paths on small data):

* :func:`allgatherv_big`: the concatenation of every rank's block in windows of at most
  ``max_count`` elements, one ``Allgatherv`` a window (counts and displacements relative to it);
* :func:`bcast_big`: one ``Bcast`` a window of the buffer's bytes;
* :func:`get_records`: one ``Get`` of an owner's records, split into Gets of at most
  ``max_count`` bytes (a record larger than that in pieces);
* :func:`alltoallv_big`: one ``Alltoallv`` of every pair message up to ``max_count / P`` bytes
  (the common case: one call, as before), a larger pair message sent point to point in pieces.

Below the limit each is the one call it replaces, with the same arguments.
"""

from __future__ import annotations

import numpy as np

from ..core.blocks import exclusive_offsets
from ..core.errors import ConfigError, MDLoaderError, internal
from ..core.options import env as setting

#: Test hook: the most elements (and bytes) one MPI call carries; None: read
#: ``MDLOADER_MPI_MAX_COUNT`` on first use (:func:`max_count`).
MAX_COUNT: int | None = None
INT_MAX = 2**31 - 1
_MIN_COUNT = 16
_TAG = 0x4D4C  # point-to-point pieces of an exchange too large for one Alltoallv
_MPI = None  # mpi4py.MPI once a hot path has imported it (get_records)


def allreduce_number(comm, value, op: str = "sum"):
    """`value` (an int or a float) reduced over `comm` with ``"sum"``, ``"max"`` or ``"min"``, by
    a buffer ``Allreduce``: the rank's other Python threads keep running while it waits.

    mpi4py's pickle-based ``comm.allreduce`` (and ``reduce``/``scan``) creates a hidden duplicate
    of the communicator on its first call there, collectively, **holding the GIL while it waits**
    for the other ranks (measured, mpi4py 4.1.2 + Open MPI 5.0.11: another thread of the waiting
    rank ran once in 1 s during the first call, ~900 times during later ones). A rank waiting
    there freezes its producer thread, its progress thread and the trainer: if another rank needs
    any of them before it can join (an exchange, a Get's target progress), the job hangs
    (seen on the emulated cluster: one rank in its first ``Win.Get`` of a loader while the
    others sat in an allreduce; tests/mpi_scripts/first_allreduce_gil.py)."""
    from mpi4py import MPI

    ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}
    is_int = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    buf = np.array([value], dtype=np.int64 if is_int else np.float64)
    out = np.empty_like(buf)
    comm.Allreduce(buf, out, op=ops[op])
    return int(out[0]) if is_int else float(out[0])


def agree(world, fn, *args, **kwargs):
    """Run ``fn`` on every rank, then agree: if it failed anywhere, raise on every rank.

    Use it around rank-local work that precedes a collective (reading this rank's block, say), so
    a failure on one rank becomes the same clean error everywhere instead of a hang. The error is
    re-raised as an :class:`MDLoaderError` marked ``agreed`` (rank 0 prints it, every rank exits
    non-zero); a failure that is not a user error is re-raised as it was on the failing rank.
    One buffer ``Allreduce`` of one number when every rank succeeded (8 bytes a rank at any
    scale); only after a failure are the ranks' errors gathered (:func:`raise_failure`).
    """
    err, result = attempt(fn, *args, **kwargs)
    if world is None or world.size == 1:
        if err is not None:
            raise err
        return result
    if allreduce_number(world.comm, int(err is not None), "max"):
        raise_failure(world.comm, err)
    return result


def attempt(fn, *args, **kwargs) -> tuple:
    """``(None, fn(*args, **kwargs))``, or ``(the exception, None)`` when it raised one."""
    try:
        return None, fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - reported to every rank by the caller
        return exc, None


def raise_failure(comm, err: "BaseException | None") -> None:
    """Collective over `comm`, once every rank knows some rank failed (`err`: this rank's
    exception, or None). Raises on every rank: the first failing rank's user error, agreed (rank
    0 prints it), or on that rank its own unexpected exception (a traceback there)."""
    mine = None if err is None else (type(err).__name__, str(err), isinstance(err, MDLoaderError))
    states = comm.allgather(mine)
    r, (kind, msg, user) = next((r, s) for r, s in enumerate(states) if s is not None)
    if not user and err is not None and comm.Get_rank() == r:
        raise err
    new = (type(err) if isinstance(err, MDLoaderError) and comm.Get_rank() == r
           else MDLoaderError)(msg if user else f"rank {r} failed: {kind}: {msg}")
    new.agreed = True
    raise new


def max_count() -> int:
    """The most elements and bytes one MPI call of this module carries: :data:`MAX_COUNT`, else
    ``MDLOADER_MPI_MAX_COUNT`` (read once a process)."""
    global MAX_COUNT
    if MAX_COUNT is None:
        raw = str(setting("MDLOADER_MPI_MAX_COUNT")).strip()
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if not _MIN_COUNT <= value <= INT_MAX:
            raise ConfigError(f"MDLOADER_MPI_MAX_COUNT={raw!r}: expected an integer from "
                              f"{_MIN_COUNT} to {INT_MAX} (the most elements or bytes one MPI "
                              "call carries); unset it for the default")
        MAX_COUNT = value
    return MAX_COUNT


def chunk_spans(n: int, limit: int):
    """``(lo, hi)`` spans of at most `limit` that cover ``[0, n)`` in order (none for 0); lazy,
    so a count near ``2**32`` costs nothing to describe."""
    limit = max(1, int(limit))
    return ((lo, min(int(n), lo + limit)) for lo in range(0, int(n), limit))


def num_chunks(n: int, limit: int) -> int:
    """How many spans :func:`chunk_spans` gives."""
    return -(-int(n) // max(1, int(limit)))


def _per_call(itemsize: int) -> int:
    """Elements of `itemsize` bytes one call may carry (the element and the byte bound)."""
    limit = max_count()
    return max(1, min(limit, limit // max(1, int(itemsize))))


def allgather_counts(comm, n: int) -> np.ndarray:
    """Every rank's `n` (int64, rank order), by a buffer ``Allgather``."""
    from mpi4py import MPI

    out = np.empty(comm.Get_size(), dtype=np.int64)
    comm.Allgather([np.array([n], dtype=np.int64), MPI.INT64_T], [out, MPI.INT64_T])
    return out


def window_parts(counts: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Counts and displacements (relative to `lo`) of each rank's share of ``[lo, hi)`` when the
    ranks' blocks of `counts` lie end to end."""
    starts = exclusive_offsets(counts)
    a = np.clip(starts, lo, hi)
    b = np.clip(starts + np.asarray(counts, dtype=np.int64), lo, hi)
    return b - a, np.where(b > a, a - lo, 0)


def allgatherv_big(comm, local: np.ndarray, out: np.ndarray, counts=None) -> np.ndarray:
    """Collective. Every rank's `local` (one dtype everywhere) concatenated in rank order into
    `out`, in windows of at most :func:`max_count` elements and bytes: one ``Allgatherv`` a
    window, its counts and displacements relative to the window. `counts`: every rank's
    ``local.size`` when known (else one buffer ``Allgather`` finds them)."""
    from mpi4py.util.dtlib import from_numpy_dtype

    local = np.ascontiguousarray(local)
    counts = allgather_counts(comm, local.size) if counts is None else np.asarray(counts,
                                                                                  np.int64)
    mine = int(exclusive_offsets(counts)[comm.Get_rank()])
    mpitype = from_numpy_dtype(local.dtype)
    n = int(counts.sum())
    for lo, hi in chunk_spans(n, _per_call(local.dtype.itemsize)):
        c, d = window_parts(counts, lo, hi)
        a = min(max(lo, mine), mine + local.size) - mine  # my share of the window, in `local`
        part = local[a:a + int(c[comm.Get_rank()])]
        comm.Allgatherv([part, mpitype], [out[lo:hi], (c.tolist(), d.tolist()), mpitype])
    return out


def bcast_big(comm, buf: np.ndarray, root: int = 0, limit: int | None = None) -> np.ndarray:
    """Collective. `root`'s contiguous `buf` into every rank's (same size everywhere), one
    ``Bcast`` a window of at most :func:`max_count` bytes (and `limit`, when given)."""
    from mpi4py import MPI

    if not buf.flags.c_contiguous:
        raise internal("bcast_big needs a contiguous buffer (a copy would receive the data)")
    raw = buf.reshape(-1).view(np.uint8)
    step = max_count() if limit is None else min(max_count(), int(limit))
    for lo, hi in chunk_spans(raw.size, step):
        comm.Bcast([raw[lo:hi], MPI.BYTE], root=root)
    return buf


def bcast_array(comm, arr: np.ndarray | None, root: int = 0, dtype=np.int64) -> np.ndarray:
    """Collective. `root`'s 1-d array (`dtype`) on every rank: its length by a buffer ``Bcast``,
    its elements by :func:`bcast_big` (never a pickled broadcast of a per-sample array)."""
    from mpi4py import MPI

    n = np.array([0 if arr is None else len(arr)], dtype=np.int64)
    comm.Bcast([n, MPI.INT64_T], root=root)
    out = (np.ascontiguousarray(arr, dtype=dtype) if comm.Get_rank() == root
           else np.empty(int(n[0]), dtype=dtype))
    return bcast_big(comm, out, root)


def split_runs(sizes: list, srcs: list, limit: int):
    """Records `sizes` at byte offsets `srcs` (landing end to end) cut into Gets of at most
    `limit` bytes: ``(at, sizes, srcs)`` a Get, `at` its first byte in the landing buffer.
    Whole records are grouped while they fit; a record larger than `limit` goes in pieces."""
    at, run, run_src, run_at, total = 0, [], [], 0, 0
    for n, s in zip(sizes, srcs):
        if total and total + n > limit:
            yield run_at, run, run_src
            run, run_src, run_at, total = [], [], at, 0
        if n > limit:
            for lo, hi in chunk_spans(n, limit):
                yield at + lo, [hi - lo], [s + lo]
            at += n
            run_at = at
            continue
        run.append(n)
        run_src.append(s)
        total += n
        at += n
    if run:
        yield run_at, run, run_src


def get_records(win, out, lo: int, owner: int, sizes: list, srcs: list, types: list) -> int:
    """Owner `owner`'s records (byte offsets `srcs`, lengths `sizes`, Python lists) into
    ``out[lo:]`` end to end: ONE ``Get`` (plain for one record, an ``hindexed`` target type,
    appended to `types`, for several) while they fit :func:`max_count` bytes, else one a run of
    :func:`split_runs`. Returns the bytes asked for; the caller flushes and frees `types`."""
    MPI = _MPI or _mpi()
    n = sum(sizes)
    limit = MAX_COUNT or max_count()
    if n <= limit and len(sizes) == 1:  # the commonest Get, without the loop below
        win.Get([out[lo:lo + n], MPI.BYTE], owner, target=(srcs[0], n, MPI.BYTE))
        return n
    for at, sz, sr in ((0, sizes, srcs),) if n <= limit else split_runs(sizes, srcs, limit):
        a, m = lo + at, (n if sz is sizes else sum(sz))
        if len(sz) == 1:
            win.Get([out[a:a + m], MPI.BYTE], owner, target=(sr[0], m, MPI.BYTE))
        else:
            tt = MPI.BYTE.Create_hindexed(sz, sr).Commit()
            types.append(tt)
            win.Get([out[a:a + m], MPI.BYTE], owner, target=(0, 1, tt))
    return n


def _mpi():
    global _MPI
    from mpi4py import MPI

    _MPI = MPI
    return MPI


def alltoallv_big(comm, sendbuf: np.ndarray, sendcounts: np.ndarray, recvbuf: np.ndarray,
                  recvcounts: np.ndarray) -> None:
    """Collective. ``Alltoallv`` of bytes (`sendcounts`/`recvcounts` int64, one a rank, the
    blocks end to end in each buffer) that no count, displacement or message takes past
    :func:`max_count`, with no agreement between ranks: a pair message of at most
    ``max_count // P`` bytes travels in the one ``Alltoallv`` (so its totals and displacements
    stay below the limit), a larger one (both ends know its size) point to point in pieces of at
    most ``max_count`` bytes. Below the limit it is the one ``Alltoallv`` it replaces."""
    from mpi4py import MPI

    limit, p = max_count(), comm.Get_size()
    cap = max(1, limit // p)
    sc, rc = np.asarray(sendcounts, np.int64), np.asarray(recvcounts, np.int64)
    sd, rd = exclusive_offsets(sc), exclusive_offsets(rc)
    if sc.max(initial=0) <= cap and rc.max(initial=0) <= cap:  # totals <= p * cap <= limit
        comm.Alltoallv([sendbuf, (sc, sd), MPI.BYTE], [recvbuf, (rc, rd), MPI.BYTE])
        return
    sc1, rc1 = np.where(sc <= cap, sc, 0), np.where(rc <= cap, rc, 0)
    sbuf, sd1 = _packed(sendbuf, sd, sc1, limit, copy_in=True)
    rbuf, rd1 = _packed(recvbuf, rd, rc1, limit, copy_in=False)
    reqs = []
    for j in np.flatnonzero(rc > cap).tolist():  # receives first: no unexpected-message copies
        for lo, hi in chunk_spans(int(rc[j]), limit):
            a = int(rd[j]) + lo
            reqs.append(comm.Irecv([recvbuf[a:a + hi - lo], MPI.BYTE], source=j, tag=_TAG))
    for j in np.flatnonzero(sc > cap).tolist():
        for lo, hi in chunk_spans(int(sc[j]), limit):
            a = int(sd[j]) + lo
            reqs.append(comm.Isend([sendbuf[a:a + hi - lo], MPI.BYTE], dest=j, tag=_TAG))
    comm.Alltoallv([sbuf, (sc1, sd1), MPI.BYTE], [rbuf, (rc1, rd1), MPI.BYTE])
    if rbuf is not recvbuf:  # the staged receives to their places
        for j in np.flatnonzero(rc1).tolist():
            recvbuf[rd[j]:rd[j] + rc1[j]] = rbuf[rd1[j]:rd1[j] + rc1[j]]
    MPI.Request.Waitall(reqs)


def _packed(buf: np.ndarray, displs: np.ndarray, counts: np.ndarray, limit: int,
            copy_in: bool):
    """The buffer and displacements of the blocks `counts` at `displs` for one ``Alltoallv``:
    `buf` itself (zero-count displacements set to 0) when every block ends within `limit`, else
    a staging buffer with the blocks end to end (at most `limit` bytes; `copy_in`: filled from
    `buf`, for sending)."""
    nz = np.flatnonzero(counts)
    if not nz.size or displs[nz[-1]] + counts[nz[-1]] <= limit:
        return buf, np.where(counts > 0, displs, 0)
    out, d = np.empty(int(counts.sum()), np.uint8), exclusive_offsets(counts)
    if copy_in:
        for j in nz.tolist():
            out[d[j]:d[j] + counts[j]] = buf[displs[j]:displs[j] + counts[j]]
    return out, d
