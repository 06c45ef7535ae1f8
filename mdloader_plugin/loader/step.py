"""One step of the loader: plan -> fetch -> build -> stage, under the fetch watchdog, timed.

:class:`Steps` is what the producer runs: ``run(epoch, start, stop, stats, abandoned, drain)``
yields ``(batch, record bytes)`` for each step in order. A step asks the planner for its step plan,
:class:`~.switch.Backends` for its backend, fetches this rank's records under the watchdog
(:mod:`.watchdog`), builds the batch (:class:`BatchBuilder`: column-wise when it can, sample by
sample otherwise), stages it for the device and reports the step's time to a ready batch (the
online trial reads it). An abandoned run that must keep collective exchanges matched (``drain``)
still fetches every step but builds nothing.
"""

from __future__ import annotations

import atexit
import time
from dataclasses import dataclass, field

import numpy as np

from ..records import codec, kernels
from ..batching.pyg import ColumnCollate
from .watchdog import FetchWatchdog


@dataclass
class EpochStats:
    """Timing of one epoch on this rank (seconds)."""

    epoch: int = 0
    steps: int = 0
    samples: int = 0
    wall_s: float = 0.0
    data_wait_s: float = 0.0
    fetch_s: float = 0.0
    decode_s: float = 0.0
    step_fetch_s: list = field(default_factory=list)
    backend: str = ""

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("epoch", "steps", "samples", "wall_s", "data_wait_s",
                                            "fetch_s", "decode_s", "backend")}
        if self.step_fetch_s:
            d["fetch_median_s"] = float(np.median(self.step_fetch_s))
            d["fetch_p95_s"] = float(np.percentile(self.step_fetch_s, 95))
        return d


class BatchBuilder:
    """Fetched records -> batch: column-wise (:class:`~..batching.pyg.ColumnCollate`) when the
    records allow, else ``to_sample`` a record and ``collate`` (said once, then for good)."""

    def __init__(self, to_sample, collate, log=None, name: str = "train"):
        self.to_sample, self.collate, self.log, self.name = to_sample, collate, log, name
        self.columns = ColumnCollate(to_sample, collate)
        if self.columns.enabled:
            kernels.warn_once(log)  # one line when the compiled kernels are wanted but absent

    def __call__(self, fetched, backend):
        fast = self.columns
        if fast.enabled:
            batch = fast(fetched)
            if batch is not None:  # it holds copies: the receive buffer is free again
                backend.buffers.give(fetched.buf)
                return batch
            if not fast.enabled:  # said once: the path is off for good
                self._info("batches are collated sample by sample (the records do not fit the "
                           "column-wise path: see mdloader_plugin.batching.pyg)")
        return self.per_sample(fetched)

    def per_sample(self, fetched):
        samples = [self.to_sample(codec.decode(fetched.buf, int(o), int(n)))
                   for o, n in zip(fetched.offsets, fetched.nbytes)]
        return self.collate(samples)

    def _info(self, line: str) -> None:
        if self.log is not None:
            self.log.info(f"[{self.name}] {line}")


class Steps:
    """The steps of one loader (used by its producer; holds no loader state of its own).

    Args:
        planner: this rank's :class:`~..sampling.planner.RankPlanner` (``step(epoch, step)``:
            its row; the collective backend was handed its sends; O(b) a step).
        backends: the loader's :class:`~.switch.Backends`.
        group: the replica group, or None.
        build: a :class:`BatchBuilder`.
        device: a :class:`~..batching.device.DeviceStage`.
        watchdog: a :class:`Watch` (or None: no deadline on fetches).
    """

    def __init__(self, planner, backends, group, build: BatchBuilder, device, watchdog=None):
        self.planner, self.backends, self.group = planner, backends, group
        self.build, self.device, self.watchdog = build, device, watchdog

    def run(self, epoch: int, start: int, stop: int, stats: EpochStats, abandoned, drain: bool):
        """Yield (staged batch, record bytes) for steps ``start..stop-1`` of `epoch`."""
        for step in range(start, stop):
            if abandoned.is_set() and not drain:
                return
            plan = self.planner.step(epoch, step)
            backend = self.backends.for_step(stats)
            t0 = time.perf_counter()
            if self.watchdog is not None:
                self.watchdog.arm(epoch, step, backend, plan)
            fetched = backend.fetch(plan)
            if self.watchdog is not None:
                self.watchdog.disarm()
            t1 = time.perf_counter()
            stats.fetch_s += t1 - t0
            stats.step_fetch_s.append(t1 - t0)
            if abandoned.is_set():
                self.backends.after_step(t1 - t0)  # every rank reports every step (a collective)
                backend.buffers.give(fetched.buf)
                continue  # draining: the exchange ran, nobody wants the batch
            nbytes = int(fetched.nbytes.sum())
            batch = self.build(fetched, backend)
            del fetched  # the records are in the batch now: free them before the next fetch
            t2 = time.perf_counter()
            stats.decode_s += t2 - t1
            self.backends.after_step(t2 - t0)  # the online decision reads time to a ready batch
            staged = [self.device.stage(batch)]
            del batch  # nor hold the served batch while making the next one: the tuple
            yield staged.pop(), nbytes  # yielded leaves no reference in this frame


class Watch:
    """The fetch watchdog of one loader (:mod:`.watchdog`): made with the loader (collective:
    the heartbeat ring's window) where MPI allows threads, else at its first armed fetch (a
    backstop on the fetch). A rank that gives no sign of life for ``timeout`` seconds, or (no
    ring) a fetch that outlives 6 of them, aborts the job naming the ranks this rank waited for."""

    def __init__(self, timeout: float, world, group, store, rank: int, comm=None):
        self.timeout, self.world, self.group, self.store, self.rank = (timeout, world, group,
                                                                       store, rank)
        self._dog = self._exit_hook = None
        if comm is not None and _thread_multiple():
            self._dog = FetchWatchdog(timeout, self._abort, rank, comm)
            self._exit_hook = self._dog.stop
            atexit.register(self._exit_hook)  # after mpi4py's hook: runs before MPI_Finalize

    def _abort(self) -> None:
        from mpi4py import MPI

        MPI.COMM_WORLD.Abort(3)  # the job: MPICH may end only this rank on Abort of a duplicate

    def arm(self, epoch: int, step: int, backend, plan) -> None:
        if self._dog is None:
            self._dog = FetchWatchdog(self.timeout, self._abort, self.rank)
        g, store, rank = self.group, self.store, self.rank

        def waiting_for():  # world ranks of this rank's group
            if backend.name == "collective":
                return [r for r in g.world_ranks(range(g.size)).tolist() if r != rank]
            owners = g.world_ranks(np.unique(store.owner_of(plan.ids)))
            return owners[owners != rank].tolist()

        self._dog.arm(epoch, step, backend.name, waiting_for)

    def disarm(self) -> None:
        if self._dog is not None:
            self._dog.disarm()

    def close(self) -> None:
        if self._exit_hook is not None:
            atexit.unregister(self._exit_hook)
            self._exit_hook = None
        if self._dog is not None:
            self._dog.close()
            self._dog = None


def _thread_multiple() -> bool:
    from mpi4py import MPI

    return MPI.Query_thread() >= MPI.THREAD_MULTIPLE
