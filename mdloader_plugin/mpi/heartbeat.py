"""A heartbeat ring: a rank that dies ends the job with one line naming it, whatever the other
ranks are waiting on (a part on disk, a collective, a barrier).

Open MPI's ``mpiexec`` ends a job by itself when a rank dies; a launcher that keeps the job alive
(``mpiexec --enable-recovery``, ``srun`` without ``--kill-on-bad-exit``) leaves the survivors
waiting forever for what the dead rank would have done. So each rank keeps one 64-bit word in a
tiny RMA window, and one daemon thread a rank adds one to its own word every
``min(1 s, timeout / 4)`` (a local store, no message) and reads its ring successor's word with one
``Rget`` (rank r watches r + 1 mod P). A successor whose word has not moved for `timeout` seconds,
or whose word cannot be read for that long, is gone: the watching rank prints one line naming it
and ``MPI_Abort``\\ s the job. A rank that is alive beats whatever its main thread does (a
long computation, a blocking collective), so a slow rank is never taken for a dead one; a rank
stopped (``SIGSTOP``) or holding the GIL in C code for the whole timeout is. The cost does not
grow with the job: per rank and period, one local store and one 8-byte Get.

The ring needs ``MPI_THREAD_MULTIPLE`` on every rank (its thread calls MPI while the main thread
may be inside a collective); without it :func:`start` returns None and nothing is watched. The
loader's fetch watchdog (``loader/watchdog.py``) runs the same ring with fetch-specific words.
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np

from ..core.errors import ConfigError
from ..core.options import env, env_default
from .agree import require_same

CLOSED = -1  # a word that says its rank closed its heartbeat: its watcher stops watching


class Heartbeat:
    """One rank's heartbeat and its watch on its ring successor (module doc). Creating one is
    collective over `comm`; :meth:`close` is too, :meth:`leave` is not. `said`: what the job
    was doing and what to do, appended to the line that names a dead rank."""

    def __init__(self, comm, timeout: float, said: str, abort=None):
        from mpi4py import MPI

        self._MPI, self.comm, self.timeout, self.said = MPI, comm, timeout, said
        self.rank, size = comm.Get_rank(), comm.Get_size()
        self.next = (self.rank + 1) % size
        self._abort = abort or (lambda: comm.Abort(1))
        self.win = MPI.Win.Allocate(8, 8, comm=comm)
        self.word = np.frombuffer(self.win.tomemory(), dtype=np.int64)
        self.word[0] = 1
        comm.Barrier()  # every word set before any is read
        self._stop, self._closed = threading.Event(), False
        self._thread = threading.Thread(target=self._run, name="mdloader-heartbeat",
                                        daemon=True)
        self._thread.start()

    @property
    def period(self) -> float:
        return min(1.0, max(self.timeout / 4, 0.05))

    def _run(self) -> None:
        MPI, win, word = self._MPI, self.win, self.word
        seen = np.zeros(1, dtype=np.int64)
        last, req, watching = None, None, True
        since = tick = time.monotonic()
        win.Lock_all(MPI.MODE_NOCHECK)
        try:
            while not self._stop.wait(self.period):
                word[0] += 1
                win.Sync()
                now = time.monotonic()
                if now - tick > 4 * self.period:  # this thread was starved (a loaded machine):
                    since = now  # the successor's silence meanwhile is no evidence
                tick = now
                if not watching:
                    continue
                if req is None:
                    req = win.Rget([seen, MPI.INT64_T], self.next, target=(0, 1, MPI.INT64_T))
                if req.Test():
                    req = None
                    if seen[0] == CLOSED:
                        watching = False
                    elif seen[0] != last:
                        last, since = int(seen[0]), now
                if watching and now - since > self.timeout:
                    self._gone(readable=req is None)
                    return
        finally:
            if self._closed:
                word[0] = CLOSED
                win.Sync()
                end = time.monotonic() + self.timeout
                while req is not None and not req.Test() and time.monotonic() < end:
                    time.sleep(0.01)  # a Get in flight (its target is alive or closed)
                win.Unlock_all()

    def _gone(self, readable: bool) -> None:
        how = "" if readable else " (its word could not be read)"
        print(f"mdloader: error: [rank {self.rank}] rank {self.next} gave no sign of life for "
              f"{self.timeout:g} s{how}: its process died or stopped; {self.said}",
              file=sys.stderr, flush=True)
        sys.stdout.flush()
        self._abort()

    def close(self) -> None:
        """The normal end, collective: this rank stops beating and says so (its watcher stops
        watching), then every rank frees the window."""
        self._closed = True
        self._stop.set()
        self._thread.join()
        self.win.Free()

    def leave(self) -> None:
        """The failing end, this rank alone: stop beating without a word, no collective. If this
        process lingers instead of ending the job, its watcher ends it after the timeout."""
        self._stop.set()


def timeout_of(comm, name: str) -> float:
    """``$name`` as seconds (0 or less: off), the same on every rank: a rank whose value differs
    from rank 0's, or a value that is not a number, is one line and exit 2 on every rank.
    Collective over `comm`."""
    raw = str(env(name))
    require_same(comm, {name: raw}, name, f"give every rank the same {name}")
    try:
        return float(raw) if raw.strip() else float(env_default(name))
    except ValueError:
        err = ConfigError(f"{name}={raw!r} is not a number of seconds; unset it or give e.g. "
                          "600 (0 turns the watch off)")
        err.agreed = True  # the same text on every rank (compared above)
        raise err from None


def start(comm, timeout: float, said: str) -> Heartbeat | None:
    """A :class:`Heartbeat` on every rank of `comm`, or None on every rank where there is
    nothing to watch (one rank, `timeout` <= 0, or a rank without ``MPI_THREAD_MULTIPLE``).
    Collective over `comm`; `timeout` must be the same on every rank (:func:`timeout_of`)."""
    if comm is None or comm.Get_size() == 1 or timeout <= 0:
        return None
    from mpi4py import MPI

    level = comm.allreduce(MPI.Query_thread(), op=MPI.MIN)
    if level < MPI.THREAD_MULTIPLE:
        if comm.Get_rank() == 0:
            print("mdloader: warning: MPI was initialised without MPI_THREAD_MULTIPLE on some "
                  "rank: a rank that dies is not watched (a launcher that keeps the job alive "
                  "then leaves the others waiting)", file=sys.stderr, flush=True)
        return None
    return Heartbeat(comm, timeout, said)
