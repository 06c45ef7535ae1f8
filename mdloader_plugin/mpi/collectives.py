"""Collectives MDLoader builds on: a number reduced by a buffer ``Allreduce`` (never the pickled
one, which holds the GIL), and an agreement on rank-local work before a collective."""

from __future__ import annotations

import numpy as np

from ..core.errors import MDLoaderError


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
    """
    err: BaseException | None = None
    result = None
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - reported to every rank below
        err = exc
    if world is None or world.size == 1:
        if err is not None:
            raise err
        return result
    mine = None if err is None else (type(err).__name__, str(err), isinstance(err, MDLoaderError))
    states = world.comm.allgather(mine)
    failed = [(r, s) for r, s in enumerate(states) if s is not None]
    if not failed:
        return result
    r, (kind, msg, user) = failed[0]
    if not user and err is not None and world.rank == r:
        raise err
    new = (type(err) if isinstance(err, MDLoaderError) and world.rank == r else MDLoaderError)(
        msg if user else f"rank {r} failed: {kind}: {msg}")
    new.agreed = True
    raise new
