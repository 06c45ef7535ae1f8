"""MDLoader's own MPI progress thread, shared by the backends that run across nodes.

A :class:`ProgressThread` enters MPI (an ``Iprobe``) every ``interval`` seconds on a duplicate of
the loader's communicator. The one-sided backend needs it for correctness across nodes: a
passive-target Get must complete while the owner's main thread is busy outside MPI (see
``onesided.py``). The collective backend may use one for speed (``collective.py``).

A backend that is built but not in use (``backend="auto"`` keeps both until its online check is
final) :meth:`~ProgressThread.pause`\\ s its thread: a running thread changes how fast the *other*
backend's steps are (measured: 2x for the collective across hosts), so a probe of one backend
beside the other's thread measures a state that ends when the loser is dropped. Pausing is
rank-local (no MPI call): the thread stops entering MPI until :meth:`~ProgressThread.resume`.
"""

from __future__ import annotations

import threading
import time

from ..core.options import env
from ..core.log import get_logger

OFF_VALUES = ("0", "", "false", "no", "off")


class ProgressThread:
    """A daemon thread that enters MPI every `interval` seconds so RMA targets make progress."""

    def __init__(self, comm, interval: float = 0.0005):
        self.comm = comm.Dup()
        self.interval = interval
        self._stop = threading.Event()
        self._running = threading.Event()
        self._running.set()
        self._thread = threading.Thread(target=self._run, name="mdloader-progress", daemon=True)
        self._thread.start()

    @property
    def active(self) -> bool:
        """Whether the thread is entering MPI now (not paused, not closed)."""
        return self._running.is_set() and not self._stop.is_set()

    def pause(self) -> None:
        """Stop entering MPI (rank-local; the thread waits until :meth:`resume`)."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._running.wait(0.05):
                continue
            self.comm.Iprobe()
            time.sleep(self.interval)

    def close(self) -> None:
        self._stop.set()
        self._running.set()
        self._thread.join()
        self.comm.Free()


def env_switch(var: str, default: bool) -> bool:
    """A boolean environment switch documented in ``options.ENV`` (``0/false/no/off`` = off;
    unset = `default`)."""
    value = env(var)
    if value is None:
        return default
    return value.strip().lower() not in OFF_VALUES


def start(world, wanted: bool, who: str, why: str, without: str) -> ProgressThread | None:
    """A :class:`ProgressThread` on `world`'s communicator if `wanted` and MPI allows threads to
    call it (``MPI_THREAD_MULTIPLE``; else rank 0 warns, saying `without`), or None. Rank 0 logs
    one line ``<who>: ranks span N nodes, progress thread on (...) <why>``."""
    if not wanted:
        return None
    from mpi4py import MPI

    log = get_logger(world.rank)
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        if world.rank == 0:
            log.warning(f"{who}: MPI was initialised without MPI_THREAD_MULTIPLE, so no "
                        f"progress thread: {without}")
        return None
    thread = ProgressThread(world.comm)
    log.info(f"{who}: ranks span {world.num_nodes} nodes, progress thread on (an Iprobe every "
             f"{thread.interval * 1e3:g} ms) {why}")
    return thread


__all__ = ["ProgressThread", "env_switch", "start"]
