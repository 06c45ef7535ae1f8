"""Fetch watchdog: a step's fetch that never completes aborts the job with a message.

When a rank dies (SIGKILL, out of memory, a node lost), Open MPI's ``mpiexec`` tears the whole
job down by itself within seconds (measured: ``prterun noticed that process rank 2 ... exited on
signal 9`` and exit code 137 for both backends). Launchers that keep the job alive do not: with
``mpiexec --enable-recovery`` (and ``srun`` without ``--kill-on-bad-exit``) the survivors waited
forever in the collective backend's Alltoallv; a Get across nodes to a dead target spins in
``Flush_all`` the same way. So every fetch runs under a deadline: one daemon thread a loader
wakes every ``min(1 s, timeout / 4)`` and, if the current fetch has run longer than
``MDLOADER_FETCH_TIMEOUT`` seconds (default 600; ``0`` turns the watchdog off), prints one line
naming the rank, step, epoch, backend and the ranks it was waiting for, then ``MPI_Abort``\\ s.

Trade-off: the timeout must exceed the longest legitimate wait. A fetch takes milliseconds, but
the collective backend's first exchange of an epoch also waits for the slowest rank to start that
epoch (a rank still validating or writing a checkpoint), hence the generous default. The
watchdog cannot see a hang in the trainer's own collectives (gloo/NCCL have their own timeouts).
"""

from __future__ import annotations

import sys
import threading
import time

from ..core.options import env, env_default
from ..core.errors import ConfigError

ENV_VAR = "MDLOADER_FETCH_TIMEOUT"
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
    """Deadline for the fetch in progress; ``arm`` before a fetch, ``disarm`` after."""

    def __init__(self, timeout: float, abort, rank: int):
        self.timeout, self._abort, self.rank = timeout, abort, rank
        self._deadline: float | None = None
        self._what: tuple = ()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="mdloader-watchdog", daemon=True)
        self._thread.start()

    def arm(self, epoch: int, step: int, backend: str, waiting_for) -> None:
        with self._lock:
            self._deadline = time.monotonic() + self.timeout
            self._what = (epoch, step, backend, waiting_for)

    def disarm(self) -> None:
        with self._lock:
            self._deadline = None

    def _run(self) -> None:
        period = min(1.0, max(self.timeout / 4, 0.05))
        while not self._stop.wait(period):
            with self._lock:
                late = self._deadline is not None and time.monotonic() > self._deadline
                what = self._what
            if late:
                self._fire(*what)
                return

    def _fire(self, epoch: int, step: int, backend: str, waiting_for) -> None:
        ranks = waiting_for() if callable(waiting_for) else waiting_for
        print(f"mdloader: error: [rank {self.rank}] step {step} of epoch {epoch}: the {backend} "
              f"fetch from rank(s) {_ranks(ranks)} did not complete in {self.timeout:g} s; a "
              f"rank died or stopped making progress: aborting the job (raise {ENV_VAR} if "
              "ranks legitimately start epochs this far apart)", file=sys.stderr, flush=True)
        sys.stdout.flush()
        self._abort()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _ranks(ranks) -> str:
    ranks = list(ranks)
    if len(ranks) > 8:
        return ", ".join(map(str, ranks[:8])) + f", ... ({len(ranks)} ranks)"
    return ", ".join(map(str, ranks)) or "none"
