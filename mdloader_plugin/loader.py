"""MDLoader: an iterable of batches served from the ranks' memory.

Per step: the sampler's plan -> the backend fetches this rank's records -> decode (views, no copy)
-> ``to_sample`` (default: ``torch_geometric.data.Data``) -> ``collate`` (default:
``Batch.from_data_list``, exactly what PyG's DataLoader does). With PyG's defaults, or a
``to_sample`` that has a column-wise twin, the last three run column-wise instead and build the
identical batch several times faster (:mod:`.batching`). A producer thread runs up to
``prefetch`` steps ahead of the trainer; the trainer only waits when the producer is behind, and
that wait is reported as ``data_wait_s``. With ``device=``/``pin_memory=`` the producer also pins
each batch and starts its copy to the device on a side stream (:mod:`.device`).

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
  (its progress thread paused) so each is measured in the state it will run in.
"""

from __future__ import annotations

import atexit
import queue
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from . import codec
from .backends import BACKENDS, get_backend
from .backends.base import own_ids
from .batching import ColumnCollate, pyg_collate, pyg_sample
from .device import DeviceStage
from .errors import ConfigError
from .log import get_logger
from .sampler import GlobalSampler, SamplerState, resume_position

_DONE = object()
_IDLE_EXIT_S = 2.0  # a producer thread with nothing to do for this long ends (restarted on demand)
_LIVE: "weakref.WeakSet[MDLoader]" = weakref.WeakSet()


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


class _EpochSampler:
    """What trainers expect at ``loader.sampler``: ``set_epoch`` (and ``len``)."""

    def __init__(self, loader: "MDLoader"):
        self._loader = loader

    def set_epoch(self, epoch: int) -> None:
        self._loader.set_epoch(epoch)

    def __len__(self) -> int:
        return self._loader.sampler_core.per_rank


class LocalSamples(Sequence):
    """``loader.dataset``: this rank's own samples (decoded copies), for code that peeks at one."""

    def __init__(self, loader: "MDLoader"):
        self._loader = loader

    def __len__(self) -> int:
        lo, hi = self._loader.store.local_range
        return hi - lo

    def __getitem__(self, i: int):
        lo, hi = self._loader.store.local_range
        if not -len(self) <= i < len(self):
            raise IndexError(f"local sample {i} out of range ({len(self)} on this rank)")
        rec = self._loader.store.local_record(lo + (i % len(self))).copy()
        return self._loader.to_sample(codec.decode(rec))


class MDLoader:
    """Batches of random samples from a :class:`~mdloader_plugin.store.ShardStore`.

    Args:
        store: the loaded data set (collective construction).
        batch_size: samples per rank per step.
        shuffle: as ``DistributedSampler`` (same order for the same arguments with
            ``order="torch"``).
        seed: as ``DistributedSampler``.
        drop_last: as ``DistributedSampler``: drop the tail instead of padding it.
        order: the epoch permutation: ``"torch"`` (DistributedSampler's, a list of N ids a
            rank), ``"feistel"`` (computed per step, no list) or ``"auto"`` (torch up to 4M
            samples, feistel above); see :mod:`.order`.
        backend: ``"onesided"``, ``"collective"`` or ``"auto"`` (cost model + online check).
        prefetch: steps the producer thread may run ahead (0 = fetch in the caller's thread).
        prefetch_mib: at most this many MiB of records wait in the prefetch queue (at least one
            batch always may); default ``MDLOADER_PREFETCH_MIB`` or 32. Bounds the memory of
            large batches: in flight are the queue, the batch being made and the trainer's.
        to_sample: decoded ``dict[str, ndarray]`` -> sample (default: PyG ``Data``).
        collate: list of samples -> batch (default: PyG ``Batch.from_data_list``).
        profile: machine profile name or path for ``auto`` (default ``"local"``).
        online_check: let ``auto`` measure both backends early and switch once if the
            prediction was wrong.
        progress: the one-sided backend's own progress thread: ``"auto"`` (on when the ranks
            span several nodes, or as ``MDLOADER_PROGRESS_THREAD`` says), ``True`` or ``False``.
        name: the loader's name in log lines (``[train] MDLOADER-BACKEND ...``).
        balance_weights: per-sample cost (e.g. atoms a graph, one entry per global sample):
            each step's samples are dealt so every rank gets about the same total
            (``sampler.balance_plan``); the samples of a step and of an epoch do not change.
        device: move every batch there (e.g. ``"cuda"``); the producer thread starts the copy
            on a side CUDA stream so it overlaps the trainer's compute (:mod:`.device`).
            Default ``None``: batches stay on the host.
        pin_memory: page-locked host batches (default: on when ``device`` is CUDA; without an
            accelerator it warns once and does nothing, as PyTorch's DataLoader does).
        sampling: how the store's data sets share an epoch (:mod:`.sampling`): a type name,
            ``"TYPE:key=value,..."`` or a mapping ``{type: temperature, temperature: 2}``;
            default ``proportional`` (every sample once, the single-file order).
        producer: who collates the fetched records: ``"thread"`` (the producer thread, in the
            trainer's process) or ``"process"`` (a helper process, :mod:`.collate_process`:
            the trainer's GIL stays free; same batches); default ``MDLOADER_PRODUCER`` or
            ``thread``. The fetch always runs in the rank's thread (MPI stays in the rank).
        batches: a batch plan that replaces the sampler: ``steps_in(epoch)`` and
            ``plan(epoch, step)`` (``[P, b]`` ids, short rows padded with -1), e.g. upstream
            HydraGNN's cost-aware batches
            (:class:`~mdloader_plugin.sampling.node_budget.NodeBudgetPlan`);
            `batch_size`, `shuffle`, `seed`, `drop_last` and `sampling` then do not apply.
    """

    def __init__(self, store, *, batch_size: int, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, backend: str = "auto", prefetch: int = 2,
                 to_sample: Callable[[dict], Any] | None = None,
                 collate: Callable[[list], Any] | None = None, profile: str | None = None,
                 online_check: bool = True, progress: str | bool = "auto", name: str = "train",
                 balance_weights: np.ndarray | None = None, prefetch_mib: float | None = None,
                 pin_memory: bool | None = None, device=None, sampling=None,
                 order: str = "auto", producer: str | None = None, batches=None):
        world = store.world
        self.store, self.world, self.name = store, world, name
        self.rank = 0 if world is None else world.rank
        self.size = 1 if world is None else world.size
        from .world import agree  # the same arguments everywhere: rank 0 reports once

        self.sampler_core = agree(world, _checked_sampler, store.num_samples, self.size,
                                  batch_size, prefetch, backend, profile, prefetch_mib,
                                  shuffle=shuffle, seed=seed, drop_last=drop_last,
                                  weights=balance_weights, mix=(sampling, store), order=order,
                                  batches=batches)
        self.sampler_core.rank = self.rank  # a batch plan's batch_len is this rank's
        self.batch_size, self.prefetch = int(batch_size), prefetch
        self.drop_last = bool(drop_last)  # DataLoader's attribute (HydraGNN 5.0 counts batches)
        self.prefetch_bytes = _prefetch_bytes(prefetch_mib)
        self.to_sample = to_sample or pyg_sample
        self.collate = collate or pyg_collate
        self._column_collate = ColumnCollate(self.to_sample, self.collate)
        self.producer, self._helper = _producer_kind(producer), None
        self.epoch, self._step, self._resuming = 0, 0, False
        self._last_iter_epoch: int | None = None  # to guess the epoch after this one
        self.speculation = {"taken": 0, "dropped": 0}  # early next-epoch steps
        self.requested_backend = backend
        self.log = get_logger(self.rank)
        self._device = DeviceStage(device, pin_memory, self.log)
        if self.producer == "process":
            self._helper = self._start_helper()
        self._comm = world.comm.Dup() if self.size > 1 else None
        self._agree_comm = world.comm.Dup() if self.size > 1 else None  # main thread only
        self.group = store.group  # backends work inside it (mdloader_plugin.groups)
        self._group_comm = self.group.comm.Dup() if self.group and self.group.size > 1 else None
        if self.size > 1:
            self._check_threads()
        self._backends = self._make_backends(backend, progress)
        self.decision = self._initial_decision(backend, profile)
        self.backend_name = self.decision["backend"]
        self._online, self._serving = None, None
        if backend == "auto" and online_check and self.size > 1:
            self._online = _OnlineSwitch(self)
        self._activate(self.decision["backend"] if self._online is None
                       else self._online.check.backend_for_next_step())
        self._producer: _Producer | None = None
        from .watchdog import fetch_timeout

        self._fetch_timeout, self._watchdog = fetch_timeout(), None
        self.epoch_stats = EpochStats()
        self.dataset = LocalSamples(self)
        self.sampler = _EpochSampler(self)
        self.batch_sampler = self.sampler  # HydraGNN main calls set_epoch here first (#524)
        self.max_steps: int | None = None  # serve at most this many steps an epoch (a cap)
        self._log_memory()
        if not _LIVE:
            atexit.unregister(_stop_producers)
            atexit.register(_stop_producers)
        _LIVE.add(self)

    # -- set-up ------------------------------------------------------------------------------
    def _start_helper(self):
        """The collate helper process, or None (with one warning) when batches cannot be
        built column-wise there: the thread producer then runs as usual."""
        from .collate_process import CollateHelper, sample_spec

        why, spec = None, None
        if not self._column_collate.enabled:
            why = "a custom collate, or a to_sample without a column-wise twin"
        else:
            try:
                spec = sample_spec(self.to_sample)
            except TypeError as exc:
                why = f"to_sample.helper_spec() is not JSON ({exc})"
            else:
                if spec is None:
                    why = "to_sample has no helper_spec() saying how the helper rebuilds it"
        if why:
            self.log.warning(f"[{self.name}] producer='process' needs the column-wise batches "
                             f"of mdloader_plugin.batching; {why}: the thread producer is used")
            self.producer = "thread"
            return None
        return CollateHelper(spec)

    def _check_threads(self) -> None:
        from mpi4py import MPI

        if self.prefetch and MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            self.log.warning("MPI was initialised without MPI_THREAD_MULTIPLE: prefetch disabled "
                             "(batches are fetched in the trainer's thread)")
            self.prefetch = 0

    def _make_backends(self, backend: str, progress) -> dict:
        names = list(BACKENDS) if backend == "auto" else [backend]
        view = _CommView(self.group, self._group_comm) if self._group_comm is not None else None
        out = {}
        for n in names:
            cls = get_backend(n)
            out[n] = cls(self.store, view, progress=progress) if n == "onesided" else cls(
                self.store, view)  # collective: its own switch (MDLOADER_COLL_PROGRESS_THREAD)
        return out

    def _initial_decision(self, backend: str, profile) -> dict:
        if backend != "auto":
            return {"backend": backend, "reason": "chosen in the configuration", "predicted_s": {}}
        dec = _choose_initial(self, profile)
        self.log.info(f"[{self.name}] {dec['decision'].log_line()}")
        return dec

    def memory_report(self) -> dict:
        """This rank's bytes by kind: ``records_bytes`` (its share of the data set),
        ``index_bytes`` (its share of the global index), ``order_bytes`` (the epoch order and
        the run of plans kept), ``buffers_bytes`` (step buffers held for reuse) and
        ``prefetch_cap_bytes`` (the most that batches waiting in the prefetch queue may hold)."""
        rep = self.store.memory_report()
        return {"records_bytes": rep["records_bytes"], "index_bytes": rep["index_bytes"],
                "order_bytes": self.sampler_core.order_bytes,
                "buffers_bytes": sum(b.buffers.held_bytes() for b in self._backends.values()),
                "prefetch_cap_bytes": self.prefetch_bytes if self.prefetch else 0,
                "samples_global": rep["samples_global"], "order": self.sampler_core.order,
                "index_kind": rep["index_kind"]}

    def _log_memory(self) -> None:
        m, mib = self.memory_report(), 2.0 ** -20
        n = max(m["samples_global"], 1)
        self.log.info(
            f"[{self.name}] memory on rank {self.rank}: records {m['records_bytes'] * mib:.1f} "
            f"MiB, index {m['index_bytes'] * mib:.1f} MiB ({m['index_kind']}), order "
            f"{m['order_bytes'] * mib:.1f} MiB ({m['order']}), buffers as steps need (prefetch "
            f"queue <= {m['prefetch_cap_bytes'] * mib:.0f} MiB); N-proportional: "
            f"{(m['index_bytes'] + m['order_bytes']) / n:.2f} B a sample")

    # -- the iterable --------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._steps_in(self.epoch)

    def _steps_in(self, epoch: int) -> int:
        """Steps served in `epoch`: the sampler's, at most :attr:`max_steps` (the same on every
        rank: set it on every rank alike). The steps past the cap are never fetched."""
        steps = self.sampler_core.steps_in(epoch)
        return steps if self.max_steps is None else min(steps, max(int(self.max_steps), 0))

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self._step = int(epoch), 0

    def rewind(self) -> None:
        """The next ``iter()`` serves the current epoch from its first step, as a fresh
        DataLoader iterator does (by default an abandoned epoch iterated again goes on where it
        stopped). A state just loaded with :meth:`load_state_dict` is kept."""
        if not self._resuming:
            self._step = 0

    def state_dict(self) -> dict:
        """Resume state: the next batch to serve is ``step`` of ``epoch`` (counted on
        ``world_size`` ranks with ``batch_size``; ``offset`` see :mod:`.sampler`)."""
        core = self.sampler_core
        return SamplerState(core.seed, self.epoch, self._step, self.size, self.batch_size,
                            core.offset_of(self.epoch), core.order).to_dict()

    def load_state_dict(self, state: dict) -> None:
        """Continue from `state`, also when it was saved on another number of ranks or batch
        size: the rest of that epoch then serves every not-yet-served sample (see
        :func:`~mdloader_plugin.sampler.resume_position`)."""
        core = self.sampler_core
        try:
            st = SamplerState.from_dict(state)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if st.seed != core.seed:
            raise ConfigError(f"loader state has seed {st.seed} but this loader uses seed "
                              f"{core.seed}; resume with the same seed")
        if st.order and st.order != core.order:
            raise ConfigError(f"loader state was saved with order {st.order!r} but this loader "
                              f"uses {core.order!r}; resume with order={st.order!r}")
        if st.offset > core.num_samples:
            raise ConfigError(f"loader state offset {st.offset} exceeds the data set's "
                              f"{core.num_samples} samples; is it from another data set?")
        mix = core.mix
        if mix is not None and mix.world_size is not None and st.world_size not in (0, self.size):
            raise ConfigError(f"loader state is from {st.world_size} ranks but sampling "
                              f"{mix.name!r} splits the data sets by rank count; resume on "
                              f"{st.world_size} ranks")
        offset, step = resume_position(st, core.num_samples, self.size, self.batch_size,
                                       core.drop_last)
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
            prod = _Producer(self, self.epoch, start, stats, guess)
            self._producer = prod
            prod.start(threaded=self.prefetch > 0)
        self.epoch_stats = stats
        return self._consume(prod, start, stats)

    def _consume(self, prod: "_Producer", start: int, stats: EpochStats):
        t_epoch = time.perf_counter()
        served = 0
        try:
            for step in range(start, len(self)):
                t0 = time.perf_counter()
                item = self._device.ready(prod.next())
                stats.data_wait_s += time.perf_counter() - t0
                self._step = step + 1
                stats.steps += 1
                served += 1
                stats.samples += self.sampler_core.batch_len(step, prod.epoch)
                yield item
                del item  # the trainer has it; do not keep it alive while the next one is made
        finally:
            stats.wall_s = time.perf_counter() - t_epoch
            if served < len(self) - start:
                prod.abandon()

    def _all_ranks(self, mine: bool) -> bool:
        """Whether `mine` holds on every rank (collective over the loader's own communicator for
        this question, when a producer may have fetched ahead: the main thread's question never
        interleaves with the producer thread's exchanges on the others).

        Taking over the early next-epoch steps is rank-local knowledge (did this rank consume
        the whole epoch?): a rank that read every batch would take them over while one that
        abandoned the epoch (HydraGNN's graph-size scan stops at a data-dependent batch) drops
        them and fetches those steps again, so the second ran more exchanges than the first: the
        collective backend's Alltoallv failed with MPI_ERR_TRUNCATE (or paired different steps)
        and the online check's per-step allreduce met a rank still fetching
        (tests/mpi_scripts/takeover_mismatch.py). Either every rank takes over, or none.

        Asked only where steps are collective (a collective backend, or the online check's
        per-step reduction), the same on every rank: a loader of one-sided Gets alone keeps
        letting ranks iterate independently, as before."""
        collective = "collective" in self._backends or (self._online is not None
                                                         and self._online.active)
        if self._agree_comm is None or not self.prefetch or not collective:
            return bool(mine)
        from .world import allreduce_number  # a pickled allreduce would hold the GIL (its doc)

        return bool(allreduce_number(self._agree_comm, int(bool(mine)), "min"))

    def _finish_producer(self) -> None:
        if self._producer is not None:
            self._producer.abandon()
            self._producer.join()
            self._producer = None

    def traffic(self) -> dict:
        """Bytes this rank has received from other ranks, on its node and off it (backends
        still open; :meth:`~mdloader_plugin.backends.base.Backend._count`)."""
        out = {"on_node": 0, "off_node": 0}
        for b in self._backends.values():
            for k in out:
                out[k] += b.traffic[k]
        return out

    def close(self) -> None:
        """Stop the producer and free MPI resources (collective: call on every rank)."""
        self._finish_producer()
        if self._helper is not None:
            self._helper.close()
            self._helper = None
        if self._watchdog is not None:
            self._watchdog.close()
            self._watchdog = None
        for b in self._backends.values():
            b.close()
        self._backends = {}
        for comm in (self._comm, self._group_comm, self._agree_comm):
            if comm is not None:
                comm.Free()
        self._comm = self._group_comm = self._agree_comm = None

    def __enter__(self) -> "MDLoader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- used by the producer ------------------------------------------------------------------
    def _arm_watchdog(self, epoch: int, step: int, backend, plan) -> None:
        """Abort the job if this fetch outlives ``MDLOADER_FETCH_TIMEOUT`` (see watchdog)."""
        if self.size == 1 or self._fetch_timeout <= 0:
            return
        if self._watchdog is None:
            from .watchdog import FetchWatchdog

            self._watchdog = FetchWatchdog(self._fetch_timeout, lambda: self.world.comm.Abort(3),
                                           self.rank)

        def waiting_for():  # world ranks of this rank's group
            g = self.group
            if backend.name == "collective":
                return [r for r in g.world_ranks(range(g.size)).tolist() if r != self.rank]
            owners = g.world_ranks(np.unique(self.store.owner_of(own_ids(plan, self.rank))))
            return owners[owners != self.rank].tolist()

        self._watchdog.arm(epoch, step, backend.name, waiting_for)

    def _disarm_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.disarm()

    def _backend_for_step(self, stats: EpochStats):
        """The backend of the next step (the online check may probe or switch)."""
        name = self.decision["backend"]
        if self._online is not None and self._online.active:
            name = self._online.backend()
        self._activate(name)
        if name not in stats.backend.split("+"):
            stats.backend = f"{stats.backend}+{name}" if stats.backend else name
        self.backend_name = self.decision["backend"]
        return self._backends[name]

    def _activate(self, name: str) -> None:
        """Only `name` may run its helpers (progress thread) while it serves (rank-local)."""
        if name != self._serving:
            for n, b in self._backends.items():
                if n != name:
                    b.set_active(False)
            self._backends[name].set_active(True)
            self._serving = name

    def _after_step(self, seconds: float) -> None:
        if self._online is not None and self._online.active:
            self._online.record(seconds)

    def _build_batch(self, fetched, backend):
        fast = self._column_collate
        if fast.enabled:
            batch = fast(fetched)
            if batch is not None:  # it holds copies: the receive buffer is free again
                backend.buffers.give(fetched.buf)
                return batch
            if not fast.enabled:  # said once: the path is off for good
                self.log.info(f"[{self.name}] batches are collated sample by sample (the "
                              "records do not fit the column-wise path: see "
                              "mdloader_plugin.batching)")
        samples = [self.to_sample(codec.decode(fetched.buf, int(o), int(n)))
                   for o, n in zip(fetched.offsets, fetched.nbytes)]
        return self.collate(samples)


def _producer_kind(producer: str | None) -> str:
    from .options import env

    src = "producer"
    if producer is None:
        src, producer = "MDLOADER_PRODUCER", env("MDLOADER_PRODUCER")
    if producer not in ("thread", "process"):
        raise ConfigError(f"{src} must be 'thread' or 'process', got {producer!r}")
    return producer


def _prefetch_bytes(mib: float | None) -> int:
    from .options import env

    src = "prefetch_mib"
    if mib is None:
        src, mib = "MDLOADER_PREFETCH_MIB", env("MDLOADER_PREFETCH_MIB")
    try:
        value = float(mib)
    except (TypeError, ValueError):
        value = float("nan")
    if not value > 0:
        raise ConfigError(f"{src} must be a number of MiB > 0, got {mib!r}")
    return int(value * 2**20)


def _checked_sampler(num_samples: int, size: int, batch_size, prefetch, backend: str, profile,
                     prefetch_mib, **kw) -> GlobalSampler:
    """MDLoader's arguments checked (a bad one is a ConfigError) and its sampler."""
    _prefetch_bytes(prefetch_mib)
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size <= 0:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
    if isinstance(prefetch, bool) or not isinstance(prefetch, (int, np.integer)) or prefetch < 0:
        raise ConfigError(f"prefetch must be an integer >= 0, got {prefetch!r}")
    if backend != "auto":
        try:
            get_backend(backend)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    else:
        from .estimator.profile import get_profile

        get_profile(profile)  # a missing or absurd profile fails here, before any collective
    batches = kw.pop("batches", None)
    if batches is not None:
        if batches.world_size != size:
            raise ConfigError(f"the batch plan was made for {batches.world_size} ranks, the "
                              f"loader has {size}")
        return batches
    try:
        kw["mix"] = _mix(*kw["mix"], size)
        return GlobalSampler(num_samples, size, int(batch_size), **kw)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _mix(sampling, store, size: int):
    """The store's data-set mix for `sampling` (None: plain single-order epochs)."""
    from .sampling import DataSets, get_mix

    if sampling is None and "dataset_starts" not in store.meta:
        return None
    mix = get_mix(sampling, DataSets.of_store(store), size)
    return None if mix.name == "proportional" else mix


class _CommView:
    """The world as backends see it, but talking on the loader's private communicator."""

    def __init__(self, world, comm):
        self.comm, self.rank, self.size = comm, world.rank, world.size
        self.node_of, self.num_nodes = world.node_of, world.num_nodes
        self.local_rank, self.local_size = world.local_rank, world.local_size


class _Producer:
    """Fetches, decodes and collates the steps of an epoch, in a thread or inline.

    The thread works through *segments* (epoch, first step, end step) that only the loader's
    thread hands it: at start the epoch asked for, then the first ``prefetch`` steps of the epoch
    the loader expects next (``spec_epoch``); :meth:`take_over` hands it the rest of that epoch
    and the next guess. Which exchanges run is thereby fixed by the trainer's calls, never by
    timing, so every rank runs the same ones; an abandoned producer finishes the segments it was
    given (exchanging without decoding when a collective backend needs the match) and stops.
    """

    def __init__(self, loader: MDLoader, epoch: int, start: int, stats: EpochStats,
                 spec_epoch: int):
        self.loader, self.epoch, self.start_step = loader, epoch, start
        self.q: queue.Queue = queue.Queue(maxsize=max(1, loader.prefetch))
        self._segments: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._room = threading.Condition()  # bytes of records waiting in q, capped
        self._queued = 0
        self._thread_idle = False
        self._abandoned = threading.Event()
        self._thread: threading.Thread | None = None
        self._inline = None
        self.consumed = 0  # batches the consumer took from the current epoch
        self.spec_epoch, self.spec_steps, self.spec_stats = None, 0, None
        self._segments.put((epoch, start, loader._steps_in(epoch), stats))
        self._plan_speculation(spec_epoch)
        # Collective exchanges must be matched on every rank, so an abandoned producer keeps
        # exchanging (without decoding) through the segments it was given.
        self.drain = any(n == "collective" for n in loader._backends) and loader.size > 1

    def _plan_speculation(self, spec_epoch: int) -> None:
        ld = self.loader
        self.spec_epoch = spec_epoch
        self.spec_steps = min(ld.prefetch, ld._steps_in(spec_epoch))
        self.spec_stats = EpochStats(epoch=spec_epoch, backend=ld.backend_name)
        if ld.prefetch > 0:  # inline producers never run ahead
            self._hand((spec_epoch, 0, self.spec_steps, self.spec_stats))

    @property
    def speculating(self) -> bool:
        return self._thread is not None and self.spec_steps > 0

    def can_take_over(self, epoch: int) -> bool:
        ld = self.loader
        return (self._thread is not None and not self._abandoned.is_set()
                and epoch == self.spec_epoch
                and self.consumed == ld._steps_in(self.epoch) - self.start_step)

    def take_over(self, next_guess: int) -> EpochStats:
        """The consumer now wants ``spec_epoch`` from step 0: its first steps are (being) made;
        hand the thread the rest of it and the next guess."""
        ld = self.loader
        epoch, stats = self.spec_epoch, self.spec_stats
        self._hand((epoch, self.spec_steps, ld._steps_in(epoch), stats))
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
        ld = self.loader
        pending: deque = deque()  # steps whose batch the collate helper is making
        for step in range(start, stop):
            if self._abandoned.is_set() and not self.drain:
                return
            plan = ld.sampler_core.plan(epoch, step)
            backend = ld._backend_for_step(stats)
            t0 = time.perf_counter()
            ld._arm_watchdog(epoch, step, backend, plan)
            fetched = backend.fetch(plan if ld.group is None else ld.group.rows(plan))
            ld._disarm_watchdog()
            t1 = time.perf_counter()
            stats.fetch_s += t1 - t0
            stats.step_fetch_s.append(t1 - t0)
            if self._abandoned.is_set():
                while pending:  # every step reported, in step order
                    yield self._collected(pending.popleft(), stats)
                ld._after_step(t1 - t0)  # every rank reports every step (a collective)
                backend.buffers.give(fetched.buf)
                continue  # draining: the exchange ran, nobody wants the batch
            nbytes = int(fetched.nbytes.sum())
            helper = ld._helper if ld._column_collate.enabled else None
            if helper is not None:
                ticket = helper.submit(fetched.buf, fetched.offsets, fetched.nbytes)
                pending.append((ticket, fetched, backend, nbytes, t0))
                del fetched
                # two steps in flight (the next fetch overlaps the helper's collate) unless
                # the online check times each step to its ready batch
                while len(pending) > (1 if ld._online is None or not ld._online.active else 0):
                    yield self._collected(pending.popleft(), stats)
                continue
            batch = ld._build_batch(fetched, backend)
            del fetched  # the records are in the batch now: free them before the next fetch
            t2 = time.perf_counter()
            stats.decode_s += t2 - t1
            ld._after_step(t2 - t0)  # the online decision reads step time to a ready batch
            yield ld._device.stage(batch), nbytes
            del batch  # nor hold the served batch while making the next one
        while pending:
            yield self._collected(pending.popleft(), stats)

    def _collected(self, entry: tuple, stats: EpochStats) -> tuple:
        """The helper's batch of a submitted step (collated here if the helper declined)."""
        ld = self.loader
        ticket, fetched, backend, nbytes, t0 = entry
        t1 = time.perf_counter()
        batch = ld._helper.result(ticket)
        if batch is None:  # as the thread path: off for good, said once
            ld._column_collate.enabled = False
            ld.log.info(f"[{ld.name}] batches are collated sample by sample in the producer "
                        "thread (the records do not fit the column-wise path: see "
                        "mdloader_plugin.batching)")
            batch = ld._build_batch(fetched, backend)
        else:
            backend.buffers.give(fetched.buf)
        del fetched
        t2 = time.perf_counter()
        stats.decode_s += t2 - t1
        ld._after_step(t2 - t0)
        return ld._device.stage(batch), nbytes

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
            self.q.put(_DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which re-raises
            self.q.put(exc)

    def _enqueue(self, item: tuple) -> None:
        """Queue (batch, nbytes) once there is room: fewer than ``prefetch`` batches and at most
        ``prefetch_bytes`` of records waiting (one batch always may wait)."""
        cap = self.loader.prefetch_bytes
        with self._room:
            while (self._queued and self._queued + item[1] > cap
                   and not self._abandoned.is_set()):
                self._room.wait(0.05)
            if self._abandoned.is_set():
                return
            self._queued += item[1]
        while not self._abandoned.is_set():
            try:
                self.q.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

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
            item = next(self._inline, _DONE)
        else:
            item = self.q.get()
        if isinstance(item, BaseException):
            raise item
        if item is _DONE:
            raise AssertionError("Internal error: producer ended before the epoch's last step")
        batch, nbytes = item
        if self._inline is None:
            with self._room:
                self._queued -= nbytes
                self._room.notify()
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
                try:  # unblock a producer waiting on a full queue
                    self.q.get(timeout=0.05)
                except queue.Empty:
                    pass
            self._thread.join()
            while not self.q.empty():
                item = self.q.get_nowait()
                if isinstance(item, BaseException) and not isinstance(item, Exception):
                    raise item


def _choose_initial(loader: MDLoader, profile) -> dict:
    """Backend from the cost model and machine profile (``estimator``)."""
    from .estimator.choose import choose_initial
    from .estimator.profile import get_profile

    prof = get_profile(profile)
    # a rank gets fewer than batch_size samples a step when the data set is small: the model is
    # told what a step really carries
    per_step = max(1, min(loader.batch_size, loader.sampler_core.per_rank))
    g = loader.group  # the backends' world is the replica group (W ranks, W = P without groups)
    dec = choose_initial(g.size if g else 1, g.local_size if g else 1, per_step,
                         loader.store.index.size_sample(), prof)
    return {"backend": dec.backend, "reason": dec.reason, "predicted_s": dict(dec.predicted_s),
            "decision": dec, "profile": prof}


class _OnlineSwitch:
    """Asks ``estimator.online.OnlineCheck`` which backend serves each step and obeys: every
    step's time is reduced with MAX over ranks, so every rank feeds identical numbers and takes
    the identical decision at the same step (a collective decision, never a divergent one)."""

    def __init__(self, loader: MDLoader):
        from .estimator.online import OnlineCheck, blind_to_network

        self.loader = loader
        nodes = loader.world.num_nodes if loader.world is not None else 1
        blind = blind_to_network(loader.decision.get("profile"), nodes)
        self.check = OnlineCheck(loader.decision["decision"],
                                 **({"skip_ratio": float("inf")} if blind else {}))
        self._settled = False  # the final decision obeyed (losers closed)

    @property
    def active(self) -> bool:
        return not self._settled

    def backend(self) -> str:
        """The next step's backend; decisions are obeyed here, at a step boundary (the same
        step on every rank)."""
        self._obey()
        return self.check.backend_for_next_step()

    def record(self, seconds: float) -> None:
        from .world import allreduce_number

        if not self.check.done:  # not the pickled allreduce: its first call holds the GIL
            self.check.record(allreduce_number(self.loader._comm, float(seconds), "max"))

    def _obey(self) -> None:
        ld = self.loader
        for res in self.check.pop_events():
            ld.decision = {"backend": res.backend, "reason": res.reason,
                           "predicted_s": dict(res.predicted_s),
                           "measured_s": dict(res.measured_s), "decision": res}
            ld.log.info(f"[{ld.name}] {res.log_line()}")
        if self.check.done and not self._settled:
            self._settled = True
            keep = self.check.result.backend
            ld._activate(keep)
            for name in [n for n in ld._backends if n != keep]:
                ld._backends.pop(name).close()  # same step on every rank; frees its progress thread
