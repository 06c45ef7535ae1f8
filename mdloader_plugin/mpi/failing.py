"""The failing way to close: this rank alone prints its cause and aborts the job.

An MPI object (a loader, a store) closes in one of two ways (docs/reliability.md). The normal
close is collective: every rank frees its windows and communicators together. A close reached
while an exception propagates is the failing one: the other ranks are somewhere else (in the next
exchange, in a gradient allreduce), so a collective free, a producer's drain or a wait for a peer
would hang the job, and the failing rank's error would never be printed. This rank then prints
its own line first (:func:`~.abort.report_error`: a traceback for a bug, one line with the rank)
and calls ``MPI_Abort`` on ``COMM_WORLD``: no collective, no drain, no wait.

Which closes fail (:func:`propagating`):

* ``__exit__`` with an exception: the exception it was handed;
* ``close()`` called from a ``finally`` (or an ``except``) block that an exception reached:
  ``sys.exc_info()``, which Python sets for the whole time such a block runs, in every function
  it calls. A ``close()`` in an ``except`` block that handled an exception and means to go on
  also sees it, and aborts: on several ranks a rank-local exception cannot be recovered from
  without the others (they wait in the next exchange);
* an uncaught exception at interpreter exit: while a multi-rank loader or store is open
  (:func:`opened` / :func:`closed` count them) ``sys.excepthook`` is chained to
  :func:`_excepthook`, which prints and aborts before ``atexit`` would drain a producer or
  finalise MPI under a running exchange; plain ``python script.py`` then ends as
  ``python -m mpi4py`` does;
* an exception in a thread of ours (producer, watchdog, progress poller), whose targets are
  wrapped in :func:`thread_target`.

Not failing: no exception, ``GeneratorExit``/``StopIteration`` (a generator closed early),
``SystemExit`` with code 0, and an *agreed* error (``exc.agreed``: raised on every rank alike, so
the collective close is safe and the error is reported once, as :func:`~.abort.abort_on_error`
does).
"""

from __future__ import annotations

import sys
import threading
import time

from .abort import report_error

_OPEN = [0]  # multi-rank loaders and stores open in this process
_LOCK = threading.Lock()
_PREVIOUS: list = []  # the excepthook ours chains to while installed
#: seconds between this rank's line and ``MPI_Abort``: MPICH's launcher, killing the job at
#: once, lost the aborting rank's whole stderr in 1 of ~10 runs when the abort followed at once
FORWARD_S = 0.3
#: ``close(exc=CURRENT)``: the exception being handled where close is called, if any
CURRENT = object()

__all__ = ["CURRENT", "closed", "closing", "fail", "opened", "propagating", "thread_target"]


def propagating(exc=CURRENT) -> BaseException | None:
    """`exc` (default :data:`CURRENT`: the exception being handled, ``sys.exc_info()``) if a
    close now must take the failing way, else None (module doc)."""
    if exc is CURRENT:
        exc = sys.exc_info()[1]
    if exc is None or isinstance(exc, (GeneratorExit, StopIteration, StopAsyncIteration)):
        return None
    if isinstance(exc, SystemExit) and exc.code in (0, None):
        return None
    if getattr(exc, "agreed", False):
        return None
    return exc


def fail(exc: BaseException, *, traceback: bool = True, where: str = "") -> None:
    """Print `exc`'s line on this rank, then ``MPI_Abort`` the whole job (does not return when
    MPI runs on several ranks). `traceback`: print it (False: a hook already did); `where`: see
    :func:`~.abort.report_error`."""
    if isinstance(exc, SystemExit):  # the program chose to exit (and said why, if it would)
        code = exc.code if isinstance(exc.code, int) else 1
    else:
        code = report_error(exc, trace=traceback, where=where)
    abort(code or 1)


def abort(code: int) -> None:
    """``MPI_Abort(COMM_WORLD, code)`` after flushing this rank's output and a moment
    (:data:`FORWARD_S`) for the launcher to forward it (no-op on one process or before MPI is
    initialised)."""
    sys.stdout.flush()
    sys.stderr.flush()
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return
    if mpi.COMM_WORLD.Get_size() > 1:
        time.sleep(FORWARD_S)
        mpi.COMM_WORLD.Abort(code)


def thread_target(target, name: str):
    """`target` run so that an exception in it ends the job (printed with the thread's `name`,
    then ``MPI_Abort``) instead of dying silently or leaving the trainer waiting for it."""
    def run(*args, **kwargs):
        try:
            return target(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - a thread of ours that fails ends the job
            fail(exc, where=f" in the {name} thread")
            raise

    return run


def opened(multi_rank: bool = True) -> None:
    """A multi-rank loader or store opened: uncaught exceptions end the job (module doc)."""
    if not multi_rank:
        return
    with _LOCK:
        _OPEN[0] += 1
        if _OPEN[0] == 1 and sys.excepthook is not _excepthook:
            _PREVIOUS[:] = [sys.excepthook]
            sys.excepthook = _excepthook


def closing(exc: BaseException | None) -> None:
    """A multi-rank loader or store closes: with `exc` (:func:`propagating`) the failing way
    (:func:`fail`, does not return), else :func:`closed`."""
    if exc is not None:
        fail(exc)
    closed()


def closed() -> None:
    """One of them closed; the last one gives the excepthook back (if still ours on top)."""
    with _LOCK:
        _OPEN[0] = max(_OPEN[0] - 1, 0)
        if _OPEN[0] == 0 and sys.excepthook is _excepthook and _PREVIOUS:
            sys.excepthook = _PREVIOUS.pop()


def _excepthook(typ, exc, tb) -> None:
    previous = _PREVIOUS[0] if _PREVIOUS else sys.__excepthook__
    if _OPEN[0] == 0 or propagating(exc) is None:
        previous(typ, exc, tb)
        return
    own = previous is sys.__excepthook__  # report_error prints the traceback itself
    if not own:
        previous(typ, exc, tb)
    fail(exc, traceback=own)
