"""Fetch watchdog: a job whose fetch waits on a dead rank is aborted with a message.

When a rank dies (SIGKILL, out of memory, a node lost), Open MPI's ``mpiexec`` tears the whole
job down by itself within seconds (measured: ``prterun noticed that process rank 2 ... exited on
signal 9`` and exit code 137 for both backends). Launchers that keep the job alive do not: with
``mpiexec --enable-recovery`` (and ``srun`` without ``--kill-on-bad-exit``) the survivors waited
forever in the collective backend's Alltoallv; a Get across nodes to a dead target spins in
``Flush_all`` the same way.

A fetch that takes long is not a sign of death: with the collective backend every rank's
exchange waits for the slowest rank to reach the same step, and a rank whose trainer writes a
checkpoint or runs a rank-0 evaluation is alive but not fetching. So the watchdog tells the two
apart by a heartbeat, not by the fetch's age. Each loader keeps a tiny RMA window (three 64-bit
words a rank: a beat count, and the epoch and step this rank's producer is fetching, -1 between
steps); one daemon thread a loader writes its own beat every ``min(1 s, timeout / 4)`` (a local
store, no message) and reads its ring successor's words with one ``Rget`` (rank r watches
r + 1 mod P). A successor whose beat has not moved for ``MDLOADER_FETCH_TIMEOUT`` seconds
(default 600; ``0`` turns the watchdog off), or whose words cannot be read for that long, is
gone: the watching rank prints one line naming it, where it was last seen and what this rank's
own fetch waits for, then ``MPI_Abort``\\ s. A rank that is alive beats whatever its trainer
does, so a stall between steps never aborts; one watcher a rank finds every dead rank (its
predecessor watches it, fetching or not). The cost does not grow with the job: per rank and
period, one local store and one 24-byte Get; arming a fetch is two local stores; no collective
on the hot path.

A backstop for jobs whose ranks are all alive but stuck (exchanges that never match, a rank
stalled outside the loader for an hour): a fetch in progress for :data:`STUCK_FACTOR` times the
timeout (an hour by default) aborts the job too, with a line that says so; a stall between steps
shorter than that never does.

Trade-offs: a rank whose trainer is deadlocked in a gloo/NCCL collective is left to those
collectives' own timeouts when no fetch of its peers waits on it. A process stopped (SIGSTOP)
or one that holds the GIL in C code for the whole timeout looks dead.

Without ``MPI_THREAD_MULTIPLE`` (MPI started with a lower thread level) no thread but the
trainer's may call MPI, and the trainer's is the one blocked in the fetch (the loader then
fetches in it: no prefetch): while a rank waits, nothing it can read tells a dead peer from one
that is alive but busy (a rank-0 evaluation, a checkpoint). A deadline of the timeout on the fetch
aborted such healthy stalls; so the watchdog keeps only the backstop there: a fetch in progress
for :data:`STUCK_FACTOR` timeouts aborts the job (``... did not complete in 6T s``), a stall
shorter than that never does, and a dead rank is found by the launcher (Open MPI's and MPICH's
``mpiexec``, ``srun --kill-on-bad-exit``) or by that backstop.

Every thread of the watchdog runs under :func:`~mdloader_plugin.mpi.failing.thread_target`: an
exception in it ends the job with its line (it never dies silently, nor marks this rank closed).
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np

from ..core.options import env, env_default
from ..core.errors import ConfigError
from ..mpi import failing

ENV_VAR = "MDLOADER_FETCH_TIMEOUT"
#: a fetch in progress this many timeouts long aborts even while every rank beats (stuck ranks)
STUCK_FACTOR = 6
DEFAULT_TIMEOUT_S = float(env_default(ENV_VAR))


def fetch_timeout() -> float:
    """Seconds a fetch may take (``$MDLOADER_FETCH_TIMEOUT``; 0 or less: no watchdog)."""
    raw = env(ENV_VAR)
    try:
        return float(raw) if raw.strip() else DEFAULT_TIMEOUT_S
    except ValueError:
        raise ConfigError(f"{ENV_VAR}={raw!r} is not a number of seconds; unset it or give e.g. "
                          "600 (0 turns the watchdog off)") from None


class FetchWatchdog:
    """The watchdog of one loader (module doc): ``arm`` before a fetch, ``disarm`` after.

    With `comm` (several ranks, ``MPI_THREAD_MULTIPLE``) the heartbeat ring; without, the
    backstop alone on the fetch in progress. Creating one with `comm` is collective over it (a
    window)."""

    def __init__(self, timeout: float, abort, rank: int, comm=None):
        self.timeout, self._abort, self.rank = timeout, abort, rank
        self._deadline: float | None = None
        self._what: tuple = ()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.ring = comm is not None
        if self.ring:
            from mpi4py import MPI

            self._MPI, self.comm = MPI, comm
            self.win = MPI.Win.Allocate(3 * 8, 8, comm=comm)
            self.words = np.frombuffer(self.win.tomemory(), dtype=np.int64)
            self.words[:] = (1, -1, -1)  # beat 1, not in a step
            self.next = (comm.Get_rank() + 1) % comm.Get_size()
            comm.Barrier()  # every window initialised before anyone reads one
        self._thread = threading.Thread(
            target=failing.thread_target(self._run_ring if self.ring else self._run,
                                         "mdloader-watchdog"),
            name="mdloader-watchdog", daemon=True)
        self._thread.start()

    def arm(self, epoch: int, step: int, backend: str, waiting_for) -> None:
        with self._lock:
            self._deadline = time.monotonic() + self.timeout
            self._what = (epoch, step, backend, waiting_for)
        if self.ring:
            self.words[1:] = (epoch, step)

    def disarm(self) -> None:
        with self._lock:
            self._deadline = None
        if self.ring:
            self.words[2] = -1

    @property
    def period(self) -> float:
        return min(1.0, max(self.timeout / 4, 0.05))

    def _run(self) -> None:
        """No heartbeat (no MPI_THREAD_MULTIPLE): the backstop alone, :data:`STUCK_FACTOR`
        timeouts on the fetch in progress (module doc)."""
        grace = (STUCK_FACTOR - 1) * self.timeout
        while not self._stop.wait(self.period):
            with self._lock:
                late = (self._deadline is not None
                        and time.monotonic() > self._deadline + grace)
                what = self._what
            if late:
                self._fire_late(*what)
                return

    def _run_ring(self) -> None:
        """Beat, and watch the successor's beat (an ``Rget`` at a time, never waited on)."""
        MPI, win, words = self._MPI, self.win, self.words
        seen = np.zeros(3, dtype=np.int64)
        last, since, req, watching = None, time.monotonic(), None, True
        tick = since
        win.Lock_all(MPI.MODE_NOCHECK)  # no exclusive lock ever: no lock traffic either
        try:
            while not self._stop.wait(self.period):
                words[0] += 1
                win.Sync()
                now = time.monotonic()
                if now - tick > 4 * self.period:  # this thread was starved (a loaded machine):
                    since = now  # the successor's silence meanwhile is no evidence
                tick = now
                if not watching:
                    continue
                if req is None:
                    req = win.Rget([seen, MPI.INT64_T], self.next, target=(0, 3, MPI.INT64_T))
                if req.Test():
                    req = None
                    if seen[0] < 0:  # the successor closed its loader: nothing left to watch
                        watching = False
                    elif seen[0] != last:
                        last, since = int(seen[0]), time.monotonic()
                if watching and time.monotonic() - since > self.timeout:
                    self._fire_gone(None if req is not None else seen.tolist())
                    return
                if self._stuck(now):
                    return
        except BaseException as exc:  # noqa: BLE001 - before the finally: it would say "closed"
            failing.fail(exc, where=" in the mdloader-watchdog thread")
            raise
        finally:
            words[0] = -1  # closed: whoever watches this rank stops
            win.Sync()
            end = time.monotonic() + self.timeout
            while req is not None and not req.Test() and time.monotonic() < end:
                time.sleep(0.01)  # a Get in flight at close (its target is alive or closed)
            win.Unlock_all()

    def _stuck(self, now: float) -> bool:
        """The backstop (module doc): a fetch armed :data:`STUCK_FACTOR` timeouts ago aborts."""
        with self._lock:
            late = (self._deadline is not None
                    and now > self._deadline + (STUCK_FACTOR - 1) * self.timeout)
            what = self._what
        if late:
            epoch, step, backend, waiting_for = what
            ranks = waiting_for() if callable(waiting_for) else waiting_for
            self._say(f"step {step} of epoch {epoch}: the {backend} fetch from rank(s) "
                      f"{_ranks(ranks)} has not completed in {STUCK_FACTOR * self.timeout:g} s "
                      "although every rank is alive: ranks are stuck (an exchange that never "
                      "matches, or a rank stalled outside the loader this long): aborting the job "
                      f"(the limit is {STUCK_FACTOR} x {ENV_VAR})")
        return late

    def _waits(self) -> str:
        with self._lock:
            if self._deadline is None:
                return "this rank is between steps"
            epoch, step, backend, waiting_for = self._what
        ranks = waiting_for() if callable(waiting_for) else waiting_for
        return (f"this rank's {backend} fetch of step {step} of epoch {epoch} waits for rank(s) "
                f"{_ranks(ranks)}")

    def _fire_gone(self, seen) -> None:
        where = ("its words could not be read" if seen is None else
                 "last seen between steps" if seen[2] < 0 else
                 f"last seen fetching step {seen[2]} of epoch {seen[1]}")
        self._say(f"rank {self.next} gave no sign of life for {self.timeout:g} s ({where}): its "
                  f"process died or stopped; {self._waits()}: aborting the job (raise "
                  f"{ENV_VAR} if a rank can legitimately be stopped this long)")

    def _fire_late(self, epoch: int, step: int, backend: str, waiting_for) -> None:
        ranks = waiting_for() if callable(waiting_for) else waiting_for
        self._say(f"step {step} of epoch {epoch}: the {backend} fetch from rank(s) "
                  f"{_ranks(ranks)} did not complete in {STUCK_FACTOR * self.timeout:g} s; a "
                  "rank died, stopped or stalled this long (without MPI_THREAD_MULTIPLE ranks "
                  "cannot see each other's heartbeat, so only a fetch this long counts): "
                  f"aborting the job (the limit is {STUCK_FACTOR} x {ENV_VAR})")

    def _say(self, line: str) -> None:
        print(f"mdloader: error: [rank {self.rank}] {line}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        self._abort()

    def stop(self) -> None:
        """Stop the thread (rank-local; a ring watchdog says it is closed first)."""
        self._stop.set()
        self._thread.join()

    def close(self) -> None:
        """:meth:`stop` and free the window (collective over the ring's communicator)."""
        self.stop()
        if self.ring and self.win is not None:
            self.words = None
            self.win.Free()
            self.win = None


def _ranks(ranks) -> str:
    ranks = list(ranks)
    if len(ranks) > 8:
        return ", ".join(map(str, ranks[:8])) + f", ... ({len(ranks)} ranks)"
    return ", ".join(map(str, ranks)) or "none"
