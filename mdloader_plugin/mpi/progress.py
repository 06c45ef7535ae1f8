"""MDLoader's own MPI progress: one poller a process, shared by every loader's backends.

The poller is one daemon thread that enters MPI (an ``Iprobe`` on ``COMM_WORLD``; it never
receives anything) every ``interval`` seconds. The one-sided backend needs it for correctness
across nodes: a passive-target Get must complete while the owner's main thread is busy outside
MPI (see ``onesided.py``). The collective backend may use it for speed (``collective.py``). One
``Iprobe`` drives the whole progress engine of the process (every window, every communicator),
so a second thread would only add a second contender for the MPI library's lock (Cray MPICH
serialises threads on one lock under ``MPI_THREAD_MULTIPLE``, beside the producer's Gets and
exchanges): every backend that wants progress takes a :class:`Lease` on the process's one
:class:`Poller`, and the thread runs only while some lease is *held*.

A lease is held from its backend's first fetch while the backend serves, until the backend is
closed or stops serving: a loader that was never iterated (a test set read at the very end)
polls nothing, and a validation loader beside a training one adds no thread. A loader that has
fetched keeps its lease between epochs on purpose: its peers may still Get from this rank's
window while this rank's trainer is busy elsewhere (a gradient allreduce, a validation pass).

A backend that is built but not in use (``backend="auto"`` keeps both until its online trial is
final) holds no lease (:meth:`Lease.pause`): a running thread changes how fast the *other*
backend's steps are (measured: 2x for the collective across hosts), so a probe of one backend
beside the other's thread measures a state that ends when the loser is dropped. Pausing is
rank-local (no MPI call). When another loader of the process holds the poller, it runs anyway:
progress is the process's, not a backend's.
"""

from __future__ import annotations

import atexit
import threading
import time

from ..core.options import env
from ..core.log import get_logger

OFF_VALUES = ("0", "", "false", "no", "off")
INTERVAL_S = 0.0005


class Poller:
    """The process's progress thread: runs while :attr:`leases` > 0 (:meth:`hold` /
    :meth:`release`: each backend that serves holds one lease), enters MPI every `interval`
    seconds."""

    def __init__(self, interval: float = INTERVAL_S):
        self.interval = interval
        self.leases = 0
        self.started = 0  # threads started so far (a new one each time leases leaves 0)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop: threading.Event | None = None
        self._exit_hook = False

    @property
    def running(self) -> bool:
        return self._thread is not None

    def hold(self) -> None:
        with self._lock:
            self.leases += 1
            if self._thread is None:
                from mpi4py import MPI

                if not self._exit_hook:  # registered after mpi4py's: runs before MPI_Finalize
                    atexit.register(self.stop)
                    self._exit_hook = True
                self._stop = threading.Event()
                self._thread = threading.Thread(target=self._run, args=(MPI.COMM_WORLD,
                                                                        self._stop),
                                                name="mdloader-progress", daemon=True)
                self.started += 1
                self._thread.start()

    def release(self) -> None:
        with self._lock:
            self.leases -= 1
            if self.leases > 0:
                return
            self.leases = 0
            detached = self._detach()
        self._join(*detached)

    def _run(self, comm, stop: threading.Event) -> None:
        while not stop.is_set():
            comm.Iprobe()
            time.sleep(self.interval)

    def stop(self) -> None:
        """End the thread now (at exit, before ``MPI_Finalize``; a later hold starts one)."""
        with self._lock:
            detached = self._detach()
        self._join(*detached)

    def _detach(self) -> tuple:
        thread, stop = self._thread, self._stop
        self._thread = self._stop = None
        return thread, stop

    @staticmethod
    def _join(thread, stop) -> None:
        if thread is not None:
            stop.set()
            thread.join()


POLLER = Poller()  # the process's one


class Lease:
    """One backend's claim on :data:`POLLER`: held from its first fetch (:meth:`fetching`, a
    flag test once held) while the backend serves, released by :meth:`pause` and
    :meth:`close`."""

    def __init__(self, poller: Poller = POLLER):
        self.poller = poller
        self.interval = poller.interval
        self.serving, self.held = True, False
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        """Whether this lease keeps the poller running now."""
        return self.held

    def fetching(self) -> None:
        """Called before every fetch of the backend: the first one takes the poller."""
        if not self.held:
            with self._lock:
                if self.serving and not self.held:
                    self.held = True
                    self.poller.hold()

    def pause(self) -> None:
        """The backend stops serving: let go of the poller (rank-local)."""
        with self._lock:
            self.serving = False
            self._drop()

    def resume(self) -> None:
        """The backend serves again: its next fetch takes the poller."""
        self.serving = True

    def close(self) -> None:
        self.pause()

    def _drop(self) -> None:
        if self.held:
            self.held = False
            self.poller.release()


def env_switch(var: str, default: bool) -> bool:
    """A boolean environment switch documented in ``options.ENV`` (``0/false/no/off`` = off;
    unset = `default`)."""
    value = env(var)
    if value is None:
        return default
    return value.strip().lower() not in OFF_VALUES


def start(world, wanted: bool, who: str, why: str, without: str) -> Lease | None:
    """A :class:`Lease` on the process's poller if `wanted` and MPI allows threads to call it
    (``MPI_THREAD_MULTIPLE``; else rank 0 warns, saying `without`), or None. Rank 0 logs one
    line ``<who>: ranks span N nodes, progress thread on (...) <why>``."""
    if not wanted:
        return None
    from mpi4py import MPI

    log = get_logger(world.rank)
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        if world.rank == 0:
            log.warning(f"{who}: MPI was initialised without MPI_THREAD_MULTIPLE, so no "
                        f"progress thread: {without}")
        return None
    lease = Lease()
    log.info(f"{who}: ranks span {world.num_nodes} nodes, progress thread on (an Iprobe every "
             f"{lease.interval * 1e3:g} ms, one thread a process while a loader fetches) {why}")
    return lease


__all__ = ["Lease", "POLLER", "Poller", "env_switch", "start"]
