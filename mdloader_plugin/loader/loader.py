"""MDLoader: an iterable of batches served from the ranks' memory.

Per step: this rank's step plan -> the backend fetches its records -> decode (views, no copy)
-> ``to_sample`` (default: ``torch_geometric.data.Data``) -> ``collate`` (default:
``Batch.from_data_list``, exactly what PyG's DataLoader does). With PyG's defaults, or a
``to_sample`` that has a column-wise twin, the last three run column-wise instead and build the
identical batch several times faster (:mod:`mdloader_plugin.batching`). A producer thread runs up to
``prefetch`` steps ahead; the trainer's waits for it are reported as ``data_wait_s``.

Guarantees:

* every rank yields the same number of batches per epoch (collectives in the trainer stay matched);
* the collective backend's Alltoallvs run in the same order on every rank even when a consumer
  abandons an iteration early (HydraGNN's graph-size scan does): the abandoned producer finishes
  the epoch's exchanges without decoding them, on the loader's private communicator;
* the next epoch starts without a wait: when an epoch's last batch is produced, the thread goes
  on with the first ``prefetch`` steps of the epoch it expects next (the following one if
  ``set_epoch`` advanced by one last time, else the same one again); the next ``iter()`` takes
  them over if it asks for that epoch from step 0, and otherwise they are dropped. Every rank
  runs exactly those steps whether taken over or not, so collective exchanges stay matched;
* ``backend="auto"`` picks a backend from the cost model at start; ``estimator.online`` then
  decides from measured steps (time to a ready batch, max over ranks) which one serves, at steps
  all ranks agree on; the loader only asks and obeys, and keeps the backend not serving inactive
  (holding no lease on the progress poller) so each is measured in the state it will run in.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from ..batching.pyg import pyg_collate, pyg_sample
from ..batching.device import DeviceStage
from ..core.errors import ConfigError
from ..core.log import get_logger
from ..mpi import failing
from ..mpi.world import allreduce_number
from .args import (agreed_schedule, check_state, prefetch_bytes, producer_and_trial,
                   resume_offset, state_of)
from .producer import Producer, finish_at_exit, usable_prefetch
from .step import BatchBuilder, EpochStats, Steps, Watch
from .switch import Backends
from .views import EpochSampler, LocalSamples, log_memory, memory_report
from .watchdog import fetch_timeout

__all__ = ["EpochStats", "LocalSamples", "MDLoader"]


class MDLoader:
    """Batches of random samples from a :class:`~mdloader_plugin.store.shard.ShardStore`.

    Args:
        store: the loaded data set (collective construction).
        batch_size: samples per rank per step.
        shuffle: as ``DistributedSampler`` (same order for the same arguments with
            ``order="torch"``).
        seed: as ``DistributedSampler``.
        drop_last: as ``DistributedSampler``: drop the tail instead of padding it.
        order: the epoch permutation: ``"torch"`` (DistributedSampler's, a list of N ids a
            rank), ``"feistel"`` (computed per step, no list) or ``"auto"`` (torch up to 4M
            samples, feistel above); see :mod:`mdloader_plugin.sampling.order`.
        backend: ``"onesided"``, ``"collective"`` or ``"auto"`` (cost model + online trial).
        prefetch: steps the producer thread may run ahead (0 = fetch in the caller's thread).
        prefetch_mib: at most this many MiB of records wait in the prefetch queue (at least one
            batch always may); default ``MDLOADER_PREFETCH_MIB`` or 32. Bounds the memory of
            large batches: in flight are the queue, the batch being made and the trainer's.
        to_sample: decoded ``dict[str, ndarray]`` -> sample (default: PyG ``Data``).
        collate: list of samples -> batch (default: PyG ``Batch.from_data_list``).
        profile: machine profile name or path for ``auto`` (default ``"local"``).
        online_trial: let ``auto`` time both backends on the first steps, switch once if wrong.
        online_check: the old name of `online_trial` (deprecated: one warning line, same effect).
        progress: the one-sided backend's own progress thread: ``"auto"`` (on when the ranks
            span several nodes, or as ``MDLOADER_PROGRESS_THREAD`` says), ``True`` or ``False``.
        name: the loader's name in log lines (``[train] MDLOADER-BACKEND ...``).
        balance_weights: per-sample cost (e.g. atoms a graph, one entry per global sample):
            each step's samples are dealt so every rank gets about the same total (in blocks
            of 16 ranks x 4 columns, ``sampling.balance``); the samples of a step and of an
            epoch do not change.
        device: move every batch there (e.g. ``"cuda"``); the producer thread starts the copy
            on a side CUDA stream so it overlaps the trainer's compute
            (:mod:`mdloader_plugin.batching.device`). Default ``None``: batches stay on the host.
        pin_memory: page-locked host batches (default: on when ``device`` is CUDA; without an
            accelerator it warns once and does nothing, as PyTorch's DataLoader does).
        sampling: how the store's data sets share an epoch (:mod:`mdloader_plugin.sampling.mixes`):
            a type name, ``"TYPE:key=value,..."`` or a mapping
            ``{type: temperature, temperature: 2}``; default ``proportional`` (every sample once,
            the single-file order).
        producer: ``"thread"`` (the default; the deprecated ``"process"`` is accepted with a
            one-line warning and runs the thread: see ``docs/gil-free-batches.md``).
        batches: a batch table that replaces the schedule (``steps_in``, ``step_table(epoch,
            step)``: ``[P, b]`` ids, short rows padded with -1), e.g. upstream HydraGNN's
            cost-aware batches (:class:`~mdloader_plugin.sampling.node_budget.NodeBudgetBatches`);
            `batch_size`, `shuffle`, `seed`, `drop_last` and `sampling` then do not apply.
        max_steps: serve at most this many steps an epoch (default: all; the attribute too).
    """

    def __init__(self, store, *, batch_size: int, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, backend: str = "auto", prefetch: int = 2,
                 to_sample: Callable[[dict], Any] | None = None, max_steps: int | None = None,
                 collate: Callable[[list], Any] | None = None, profile: str | None = None,
                 online_trial: bool = True, progress: str | bool = "auto", name: str = "train",
                 balance_weights: np.ndarray | None = None, prefetch_mib: float | None = None,
                 pin_memory: bool | None = None, device=None, sampling=None, order: str = "auto",
                 producer: str | None = None, batches=None, online_check: bool | None = None):
        world = store.world
        self.store, self.world, self.name = store, world, name
        self.rank, self.size = (0, 1) if world is None else (world.rank, world.size)
        self.schedule = agreed_schedule(world, store, self.size, batch_size, prefetch, backend,
                                        profile, prefetch_mib, max_steps, sampling,
                                        shuffle=shuffle, seed=seed, drop_last=drop_last,
                                        weights=balance_weights, order=order, batches=batches)
        self.schedule.rank = self.rank  # a batch table's batch_len is this rank's
        self.batch_size, self.prefetch = int(batch_size), prefetch
        self.drop_last = bool(drop_last)  # DataLoader's attribute (HydraGNN 5.0 counts batches)
        self.prefetch_bytes = prefetch_bytes(prefetch_mib)
        self.to_sample = to_sample or pyg_sample
        self.collate = collate or pyg_collate
        self.log = get_logger(self.rank)
        self._build = BatchBuilder(self.to_sample, self.collate, self.log, name)
        self.producer, online_trial, notes = producer_and_trial(producer, online_trial,
                                                                online_check)
        self.epoch, self._step, self._resuming = 0, 0, False
        self._last_iter_epoch: int | None = None  # to guess the epoch after this one
        self.speculation = {"taken": 0, "dropped": 0}  # early next-epoch steps
        self.requested_backend = backend
        self._device = DeviceStage(device, pin_memory, self.log)
        for note in notes if self.rank == 0 else ():
            self.log.warning(f"[{name}] {note}")
        self._comm = world.comm.Dup() if self.size > 1 else None
        self._agree_comm = world.comm.Dup() if self.size > 1 else None  # main thread only
        self.group = store.group  # backends work inside it (mdloader_plugin.mpi.groups)
        self._group_comm = self.group.comm.Dup() if self.group and self.group.size > 1 else None
        self._planner = self.schedule.planner(  # this rank's row and sends: O(b) a step
            self.rank, *store.local_range, self.group.first_rank if self.group else 0,
            self.group.size if self.group else None)
        if self.size > 1:
            self.prefetch = usable_prefetch(self.prefetch, self.log)
        self._switch = Backends(
            store, self.group, self._group_comm, backend, progress, profile=profile,
            per_step=max(1, min(self.batch_size, self.schedule.per_rank)),
            online=online_trial and self.size > 1, comm=self._comm,  # with auto (Backends)
            nodes=world.num_nodes if world is not None else 1, log=self.log, name=name,
            sends=self._planner.sends)  # the collective's sends: this rank's epoch inverse
        self._producer: Producer | None = None
        timeout = fetch_timeout()
        self._watch = (Watch(timeout, world, self.group, store, self.rank, self._comm)
                       if self.size > 1 and timeout > 0 else None)
        self._steps = Steps(self._planner, self._switch, self.group, self._build,
                            self._device, self._watch)
        self.epoch_stats = EpochStats()
        self.dataset = LocalSamples(self)
        self.sampler = EpochSampler(self)
        self.batch_sampler = self.sampler  # HydraGNN main calls set_epoch here first
        self.max_steps = max_steps  # serve at most this many steps an epoch (a cap)
        log_memory(self.log, self.name, self.rank, self.memory_report())
        finish_at_exit(self)
        failing.opened(self._comm is not None)  # an uncaught exception ends the job

    # -- the backends (switch.Backends owns them) ---------------------------------------------
    decision = property(lambda self: self._switch.decision, doc="the serving backend's decision")
    backend_name = property(lambda self: self._switch.name, doc="the serving backend's name")
    _backends = property(lambda self: self._switch.all)
    _online = property(lambda self: self._switch.online)
    _column_collate = property(lambda self: self._build.columns)

    # -- set-up ------------------------------------------------------------------------------
    def memory_report(self) -> dict:
        """This rank's bytes by kind, each part reporting its own (:func:`.views.memory_report`;
        docs/scale.md tabulates them at 8,192 ranks and 10^9 samples)."""
        return memory_report(self.store, self.schedule, self._planner, self._switch,
                             self.prefetch_bytes if self.prefetch else 0)

    # -- the iterable --------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.steps_in(self.epoch)

    def steps_in(self, epoch: int) -> int:
        """Steps served in `epoch`: the schedule's, at most :attr:`max_steps` (never fetched)."""
        steps = self.schedule.steps_in(epoch)
        return steps if self.max_steps is None else min(steps, max(int(self.max_steps), 0))

    def rewind(self) -> None:
        """The next ``iter()`` serves the epoch from step 0 (a just-loaded state is kept)."""
        if not self._resuming:
            self._step = 0

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self._step = int(epoch), 0

    def state_dict(self) -> dict:
        """Resume state: the next batch to serve is ``step`` of ``epoch`` (counted on ``world_size``
        ranks with ``batch_size``; ``offset`` see :mod:`mdloader_plugin.sampling.schedule`), and
        what it is valid for (:func:`.args.state_identity`: data set, shuffle, drop_last)."""
        return state_of(self)

    def load_state_dict(self, state: dict, source: str = "loader state") -> None:
        """Continue from `state` (checked: :func:`.args.check_state`), also when it was saved on
        another number of ranks or batch size: the rest of that epoch then serves every
        not-yet-served sample (:func:`~mdloader_plugin.sampling.schedule.resume_position`)."""
        core = self.schedule
        st = check_state(self, state, source)
        offset, step = resume_offset(st, core, self.size, self.batch_size)
        self._finish_producer()
        core.resume_at(st.epoch, offset)
        self.epoch = st.epoch
        if not 0 <= step <= len(self):
            raise ConfigError(f"loader state step {step} outside 0..{len(self)}")
        self._step = step
        self._resuming = True  # the next iteration serves exactly the rest (maybe nothing)

    def __iter__(self):
        # A finished epoch iterated again starts over (as a DataLoader does); a state saved at
        # the end of an epoch and just loaded leaves nothing to serve in that epoch.
        start = self._step if self._step < len(self) or self._resuming else 0
        self._resuming = False
        advances = self._last_iter_epoch is None or self.epoch == self._last_iter_epoch + 1
        self._last_iter_epoch = self.epoch
        guess = self.epoch + 1 if advances else self.epoch
        prod = self._producer
        if prod is not None and self._all_ranks(start == 0 and prod.can_take_over(self.epoch)):
            self.speculation["taken"] += 1
            stats = prod.take_over(guess)
        else:
            if prod is not None and prod.speculating:
                self.speculation["dropped"] += 1
            self._finish_producer()
            stats = EpochStats(epoch=self.epoch, backend=self.backend_name)
            prod = Producer(self._steps, self, self.epoch, start, stats, guess,
                            prefetch=self.prefetch, prefetch_bytes=self.prefetch_bytes,
                            drain="collective" in self._backends and self.size > 1,
                            backend_name=lambda: self.backend_name, fatal=self.size > 1)
            self._producer = prod
            prod.start(threaded=self.prefetch > 0)
        self.epoch_stats = stats
        return self._consume(prod, start, stats)

    def _consume(self, prod: Producer, start: int, stats: EpochStats):
        t_epoch = time.perf_counter()
        served = 0
        try:
            for step in range(start, len(self)):
                t0 = time.perf_counter()
                item = [self._device.ready(prod.next())]
                stats.data_wait_s += time.perf_counter() - t0
                self._step = step + 1
                stats.steps += 1
                served += 1
                stats.samples += self.schedule.batch_len(step, prod.epoch)
                yield item.pop()  # no reference left here: freed where the trainer drops it
        finally:
            stats.wall_s = time.perf_counter() - t_epoch
            if served < len(self) - start:
                prod.abandon()

    def _all_ranks(self, mine: bool) -> bool:
        """Whether `mine` holds on every rank (asked only where steps are collective): a rank
        taking over the early next-epoch steps while another fetches them again runs fewer
        exchanges (tests/mpi_scripts/takeover_mismatch.py), so every rank takes over or none."""
        if self._agree_comm is None or not self.prefetch or not self._switch.collective:
            return bool(mine)
        # not the pickled allreduce: it would hold the GIL (mpi.collectives.allreduce_number's doc)
        return bool(allreduce_number(self._agree_comm, int(bool(mine)), "min"))

    def _finish_producer(self) -> None:
        if self._producer is not None:
            self._producer.abandon()
            self._producer.join()
            self._producer = None

    def traffic(self) -> dict:
        """Bytes this rank has received from other ranks, on its node and off it (backends
        still open; :meth:`~mdloader_plugin.backends.base.Backend._count`)."""
        return self._switch.traffic()

    def close(self, exc: BaseException | None = failing.CURRENT) -> None:
        """Stop the producer and free MPI resources (collective: call on every rank); while an
        exception propagates (`exc`, else ``sys.exc_info()``), the failing way instead: this
        rank's line and ``MPI_Abort``, no collective (:mod:`~mdloader_plugin.mpi.failing`)."""
        exc = failing.propagating(exc)
        if self._comm is not None:
            failing.closing(exc)  # with an exception: its line and MPI_Abort, no collective
        self._finish_producer()
        if self._watch is not None:
            self._watch.close()
        self._switch.close()
        for comm in (self._comm, self._group_comm, self._agree_comm):
            if comm is not None:
                comm.Free()
        self._comm = self._group_comm = self._agree_comm = None

    def __enter__(self) -> "MDLoader":
        return self

    def __exit__(self, typ, exc, tb) -> None:
        self.close(exc)  # None: a normal close, also inside an outer except block
