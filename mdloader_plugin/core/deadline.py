"""A deadline on a call that may hold the GIL for ever: when it passes, one line and an abort of
the whole job.

ADIOS2's BP5 reader waits for ever, holding the GIL, for bytes past the end of a truncated data
subfile. No Python thread can run then (not the fetch watchdog, not a signal handler), so the
deadline is a native thread (``_deadline.c``, built with the batch kernels): armed around the
call, it writes its line to stderr and calls ``MPI_Abort`` on ``COMM_WORLD`` when the call
outlives it, so every rank ends, not only this one (on one process, ``_exit``). The thread never
calls into Python. This module imports no MPI (``core`` sits below the ``mpi`` layer): where the
process already runs mpi4py on several ranks, the MPI library's ``MPI_Abort`` and
``COMM_WORLD``'s handle are looked up through ctypes when the deadline is armed. Where the
extension was not built (no C compiler) the deadline falls back to
``faulthandler.dump_traceback_later``: a traceback and the end of this process only.
"""

from __future__ import annotations

import ctypes
import faulthandler
import sys

try:
    from . import _deadline
except ImportError:  # built optionally (setup.py)
    _deadline = None

__all__ = ["arm", "cancel"]
EXIT_CODE = 3  # as the fetch watchdog's abort
_ABORT: list = []  # (MPI_Abort's address, COMM_WORLD's handle, rank), once MPI runs


def arm(seconds: float, message: str) -> None:
    """Unless :func:`cancel` is called within `seconds`, print ``mdloader: error: [rank R]
    MESSAGE`` and abort the job."""
    if _deadline is None:
        faulthandler.dump_traceback_later(seconds, exit=True)
        return
    address, handle, rank = _mpi_abort()
    who = f"[rank {rank}] " if address else ""
    _deadline.arm(float(seconds), f"mdloader: error: {who}{message}\n".encode(), address,
                  handle, EXIT_CODE)


def cancel() -> None:
    """Cancel the armed deadline (the call returned in time)."""
    if _deadline is None:
        faulthandler.cancel_dump_traceback_later()
    else:
        _deadline.cancel()


def _mpi_abort() -> tuple[int, int, int]:
    """(address of the MPI library's ``MPI_Abort``, ``COMM_WORLD``'s native handle, rank), or
    zeros without MPI on several ranks. mpi4py's extension module links the MPI library, so the
    symbol is found through the module's own dependencies."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return 0, 0, 0
    if not _ABORT:
        world = mpi.COMM_WORLD
        if world.Get_size() < 2:
            return 0, 0, 0
        fn = ctypes.CDLL(mpi.__file__).MPI_Abort
        _ABORT[:] = [ctypes.cast(fn, ctypes.c_void_p).value, int(mpi._handleof(world)),
                     world.Get_rank()]
    return _ABORT[0], _ABORT[1], _ABORT[2]
