"""The producer: runs a loader's steps in a thread (or inline), up to ``prefetch`` ahead.

It works through *segments* (epoch, first step, end step) that only the loader's thread hands
it: at start the epoch asked for, then the first ``prefetch`` steps of the epoch the loader
expects next (``spec_epoch``); :meth:`Producer.take_over` hands it the rest of that epoch and
the next guess. Which exchanges run is thereby fixed by the trainer's calls, never by timing, so
every rank runs the same ones; an abandoned producer finishes the segments it was given
(exchanging without decoding when a collective backend needs the match) and stops.
"""

from __future__ import annotations

import atexit
import queue
import threading
import time
import weakref
from typing import Callable

from ..core.errors import internal
from ..mpi import failing
from .step import EpochStats

DONE = object()
_LIVE: weakref.WeakSet = weakref.WeakSet()  # loaders whose producers finish at exit
_IDLE_EXIT_S = 2.0  # a producer thread with nothing to do for this long ends (restarted on demand)


class Producer:
    """Runs ``steps.run`` segments (see the module doc) and hands their batches to :meth:`next`.

    Args:
        steps: a :class:`~.step.Steps` (``run(epoch, start, stop, stats, abandoned, drain)``).
        loader: ``steps_in(epoch)`` (the loader's: the schedule's, capped).
        prefetch: steps the thread may run ahead (0: inline, in the consumer's thread).
        prefetch_bytes: at most this many bytes of records wait in the queue (one batch may).
        drain: an abandoned producer still runs its segments' exchanges (collective backends).
        backend_name: the serving backend's name now (for a new epoch's stats).
        fatal: an exception in the thread ends the job there (several ranks: handed to the
            trainer it could wait behind the others' next exchange or allreduce for ever,
            :mod:`~mdloader_plugin.mpi.failing`); else it is re-raised in the trainer's thread.
    """

    def __init__(self, steps, loader, epoch: int, start: int, stats: EpochStats,
                 spec_epoch: int, *, prefetch: int, prefetch_bytes: int, drain: bool,
                 backend_name: Callable[[], str], fatal: bool = False):
        self.fatal = fatal
        self.steps, self.loader, self.prefetch = steps, loader, prefetch
        self.prefetch_bytes, self.backend_name = prefetch_bytes, backend_name
        self.epoch, self.start_step = epoch, start
        # The hand-off is two C-level SimpleQueues, so the consumer's side takes no Python
        # lock: batches go one way, the bytes each freed come back; only the producer thread
        # counts what waits (at most ``prefetch`` batches and ``prefetch_bytes``).
        self.q: queue.SimpleQueue = queue.SimpleQueue()
        self._freed: queue.SimpleQueue = queue.SimpleQueue()
        self._waiting, self._waiting_bytes = 0, 0  # producer thread's own counts
        self._segments: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._thread_idle = False
        self._abandoned = threading.Event()
        self._thread: threading.Thread | None = None
        self._inline = None
        self.consumed = 0  # batches the consumer took from the current epoch
        self.spec_epoch, self.spec_steps, self.spec_stats = None, 0, None
        self._segments.put((epoch, start, loader.steps_in(epoch), stats))
        # Collective exchanges must be matched on every rank, so an abandoned producer keeps
        # exchanging (without decoding) through the segments it was given.
        self.drain = drain
        self._plan_speculation(spec_epoch)

    def _plan_speculation(self, spec_epoch: int) -> None:
        self.spec_epoch = spec_epoch
        self.spec_steps = min(self.prefetch, self.loader.steps_in(spec_epoch))
        self.spec_stats = EpochStats(epoch=spec_epoch, backend=self.backend_name())
        if self.prefetch > 0:  # inline producers never run ahead
            self._hand((spec_epoch, 0, self.spec_steps, self.spec_stats))

    @property
    def speculating(self) -> bool:
        return self._thread is not None and self.spec_steps > 0

    def can_take_over(self, epoch: int) -> bool:
        return (self._thread is not None and not self._abandoned.is_set()
                and epoch == self.spec_epoch
                and self.consumed == self.loader.steps_in(self.epoch) - self.start_step)

    def take_over(self, next_guess: int) -> EpochStats:
        """The consumer now wants ``spec_epoch`` from step 0: its first steps are (being) made;
        hand the thread the rest of it and the next guess."""
        epoch, stats = self.spec_epoch, self.spec_stats
        self._hand((epoch, self.spec_steps, self.loader.steps_in(epoch), stats))
        self.epoch, self.start_step, self.consumed = epoch, 0, 0
        self._plan_speculation(next_guess)
        return stats

    def start(self, threaded: bool) -> None:
        if threaded:
            self._thread = threading.Thread(target=self._run, name="mdloader-prefetch",
                                            daemon=True)
            self._thread.start()
        else:
            epoch, start, stop, stats = self._segments.get_nowait()
            self._inline = self._steps(epoch, start, stop, stats)

    def _steps(self, epoch: int, start: int, stop: int, stats: EpochStats):
        return self.steps.run(epoch, start, stop, stats, self._abandoned, self.drain)

    def _run(self) -> None:
        try:
            idle_since = None
            while True:
                # abandoned is read before the queue: segments handed over before an abandon
                # are always seen (and run, when draining)
                done = self._abandoned.is_set()
                try:
                    seg = self._segments.get(timeout=0.05)
                except queue.Empty:
                    if done:
                        break
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since > _IDLE_EXIT_S:
                        with self._lock:  # a thread idle this long ends (so an unclosed loader
                            if self._segments.empty():  # can be collected); _hand restarts
                                self._thread_idle = True
                                return
                    continue
                idle_since = None
                for item in self._steps(*seg):
                    self._enqueue(item)
                    del item  # queued: only the queue and the consumer hold it
            self.q.put(DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which re-raises
            if self.fatal and failing.propagating(exc) is not None:
                failing.fail(exc, where=" in the mdloader-prefetch thread")
            self.q.put(exc)

    def _enqueue(self, item: tuple) -> None:
        """Queue (batch, nbytes) once there is room: fewer than ``prefetch`` batches and at most
        ``prefetch_bytes`` of records waiting (one batch always may wait)."""
        most, cap, nbytes = max(1, self.prefetch), self.prefetch_bytes, item[1]
        while True:
            while not self._freed.empty():  # what the consumer took since
                self._count_freed(self._freed.get_nowait())
            if self._waiting == 0 or (self._waiting < most
                                      and self._waiting_bytes + nbytes <= cap):
                break
            if self._abandoned.is_set():
                return
            try:
                self._count_freed(self._freed.get(timeout=0.05))
            except queue.Empty:
                pass
        if self._abandoned.is_set():
            return
        self._waiting += 1
        self._waiting_bytes += nbytes
        self.q.put(item)

    def _count_freed(self, nbytes: int) -> None:
        self._waiting -= 1
        self._waiting_bytes -= nbytes

    def _hand(self, segment: tuple) -> None:
        """Give the thread a segment (restarting it if it ended idle)."""
        with self._lock:
            self._segments.put(segment)
            if self._thread_idle:
                self._thread_idle = False
                self._thread.join()
                self.start(threaded=True)

    def next(self):
        if self._inline is not None:
            item = next(self._inline, DONE)
        else:
            item = self.q.get()
        if isinstance(item, BaseException):
            raise item
        if item is DONE:
            raise internal("producer ended before the epoch's last step")
        batch, nbytes = item
        if self._inline is None:
            self._freed.put(nbytes)
        self.consumed += 1
        return batch

    def abandon(self) -> None:
        self._abandoned.set()
        if self._inline is not None and self.drain:
            for _ in self._inline:  # run the remaining exchanges inline
                pass
        self._inline = None

    def join(self) -> None:
        if self._thread is not None:
            while self._thread.is_alive():
                try:  # unblock a producer waiting for room
                    item = self.q.get(timeout=0.05)
                except queue.Empty:
                    continue
                if isinstance(item, tuple):
                    self._freed.put(item[1])
            self._thread.join()
            while not self.q.empty():
                item = self.q.get_nowait()
                if isinstance(item, BaseException) and not isinstance(item, Exception):
                    raise item


def finish_at_exit(loader) -> None:
    """Have ``loader._finish_producer()`` run at interpreter exit, before ``MPI_Finalize``."""
    if not _LIVE:
        atexit.unregister(_stop_producers)
        atexit.register(_stop_producers)
    _LIVE.add(loader)


def _stop_producers() -> None:
    """Let every producer finish the exchanges it was given: a loader the script never closed
    may be fetching the next epoch's first steps, and MPI must not be finalised under a running
    collective. Registered when the first loader is made, i.e. after mpi4py's own exit hook,
    so it runs before ``MPI_Finalize``."""
    for loader in list(_LIVE):
        try:
            loader._finish_producer()
        except Exception:  # noqa: BLE001 - exiting anyway; MPI reports its own errors
            pass


def usable_prefetch(prefetch: int, log) -> int:
    """`prefetch`, or 0 (with one warning) when MPI cannot take calls from a producer thread."""
    from mpi4py import MPI

    if prefetch and MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        log.warning("MPI was initialised without MPI_THREAD_MULTIPLE: prefetch disabled "
                    "(batches are fetched in the trainer's thread)")
        return 0
    return prefetch
