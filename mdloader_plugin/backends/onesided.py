"""One-sided backend: MPI RMA ``Get`` from the owners' windows, no help from the owners.

Per step, for each remote owner ``o`` holding ``k_o`` of this rank's samples, ONE ``MPI_Get``
whose target datatype is an ``hindexed`` list of the ``k_o`` records (coalescing: one Get an
owner, not one a sample), landing contiguously in the receive buffer; local samples are memcpy'd;
then one ``MPI_Win_flush_all``. The window is opened once for the loader's life with
``Lock_all(MPI_MODE_NOCHECK)`` — never a lock/unlock a sample (15-30x slower: 33-79 us against
2.3 us a 1 KiB Get, measured on 4 ranks).

Cost: ``t_flush + n_owners * (t_get + t_dtype) + remote_bytes / bw`` — it grows with the number
of samples and owners touched, not with the number of ranks, so it wins at scale and small batches.

Progress guarantee: a passive-target Get must complete even while the owner's main thread is
blocked outside MPI (e.g. in torch's gloo allreduce). With Open MPI's ``Win.Allocate`` on one node
the window is shared memory and a Get is a direct load (osc/sm); across nodes the owner's
progress engine must run, so the process's poller (:mod:`~..mpi.progress`) pokes MPI every
0.5 ms on every rank from the loader's first fetch until it is closed (measured on the emulated
cluster: a Get across hosts to a busy target took 2.7 s with no progress thread and 0.4-22 ms with
this one). Open MPI's own ``btl_tcp_progress_thread`` is no substitute and is left off: alone, one
run in 6-8 of ``tests/mpi_scripts/blocked_target.py`` hung for good in ``Win_flush_all``; beside
this thread, OC20-sized steps across hosts stalled for 0.8-12 s at p95 in each of 4 runs; with this
thread alone, p95 stayed within 2x of the median at 1gbit in 3 of 4 runs (once 8x, at batch 32), and
one 8.4 s p95 is left at 200mbit, batch 256, on a saturated link. See :func:`wants_progress_thread`.
"""

from __future__ import annotations

import numpy as np

from ..mpi import progress as _progress
from ..mpi.collectives import get_records
from .base import Backend, Fetched, exclusive_cumsum, gather_local
from ..mpi.progress import Lease

SMALL_STEP = 64  # records a step up to which the step is planned in plain Python (_fetch_small)


def wants_progress_thread(world, setting) -> bool:
    """Whether this job needs our own progress thread.

    ``"auto"``: whenever ranks span several nodes (same-node Gets are shared-memory loads and need
    none), whatever the MPI's own progress settings: Open MPI's TCP progress thread does not
    guarantee a Get completes (module docstring), and an MPICH progress thread may or may not be
    on. ``MDLOADER_PROGRESS_THREAD=0|1`` overrides."""
    if setting != "auto":
        return bool(setting)
    return _progress.env_switch("MDLOADER_PROGRESS_THREAD",
                                world is not None and world.num_nodes > 1)


def start_progress_thread(world, setting="auto") -> Lease | None:
    """A :class:`~..mpi.progress.Lease` on the process's poller if :func:`wants_progress_thread`
    says so (see :func:`mdloader_plugin.mpi.progress.start`), or None."""
    return _progress.start(world, wants_progress_thread(world, setting), "one-sided",
                           "so Gets complete while owners compute",
                           "a Get from a rank busy outside MPI (e.g. in a gloo or NCCL "
                           "allreduce) can stall; use backend=collective or start MPI with "
                           "THREAD_MULTIPLE")


class OneSidedBackend(Backend):
    """One coalesced ``MPI_Get`` a remote owner a step (an ``hindexed`` datatype over all of that
    owner's records) under the store's shared passive-target epoch, local records copied, one
    ``Flush_all``; owners do nothing. Takes the process's poller when the ranks span nodes."""

    name = "onesided"

    def __init__(self, store, world, progress="auto"):
        super().__init__(store, world)
        self.win = None
        self._progress = None
        if self.size > 1:
            from mpi4py import MPI

            self._MPI = MPI
            self._off_node = (world.node_of != world.node_of[self.rank]).tolist()
            self.win = store.open_epoch()
            self._progress = start_progress_thread(world, progress)
            self._local = memoryview(store.buffer).cast("B")  # the window's memory: unmoved

    def set_active(self, active: bool) -> None:
        """Let go of the process's poller while another backend serves the steps (see
        :mod:`mdloader_plugin.mpi.progress`: a running one would speed up the other backend's
        probe)."""
        if self._progress is not None:
            (self._progress.resume if active else self._progress.pause)()

    def _fetch(self, plan) -> Fetched:
        if self._progress is not None:
            self._progress.fetching()  # the first fetch takes the process's poller
        ids = plan.ids
        st = self.store
        nb = st.nbytes[ids]
        src = st.offsets[ids]
        owners = st.owner_of(ids)
        if self.size > 1 and ids.size <= SMALL_STEP:
            return self._fetch_small(ids, nb, src, owners)
        mine = owners == self.rank
        if mine.all():  # every record is local (one rank, or a lucky step): no sort, no MPI
            dst = exclusive_cumsum(nb)
            out = self.buffers.take(int(dst[-1] + nb[-1]) if nb.size else 0)
            gather_local(st.buffer, src, nb, out, dst)
            return Fetched(ids, out, dst, nb)
        order = np.argsort(owners, kind="stable")  # group by owner; keep plan order inside
        dst = np.empty(ids.size, dtype=np.int64)
        dst[order] = exclusive_cumsum(nb[order])
        out = self.buffers.take(int(nb.sum()))
        if mine.any():
            gather_local(st.buffer, src[mine], nb[mine], out, dst[mine])
        self._get_remote(out, owners, order, src, nb, dst)
        return Fetched(ids, out, dst, nb)

    def _fetch_small(self, ids: np.ndarray, nb: np.ndarray, src: np.ndarray,
                     owners: np.ndarray) -> Fetched:
        """The same step as the numpy path (same layout: records grouped by owner, ascending,
        plan order inside an owner; the same Gets through :meth:`_get_owner`), planned on Python
        lists. A step of a few records pays per call, not per byte: ~40 small numpy calls cost
        4-5x more than these list operations once a collate between two fetches has left the
        caches cold (bench/fetch/profile.py)."""
        rank = self.rank
        nb_l, src_l, owners = nb.tolist(), src.tolist(), owners.tolist()
        order = sorted(range(len(nb_l)), key=owners.__getitem__)  # stable: plan order inside
        dst_l = [0] * len(nb_l)
        at = 0
        for i in order:
            dst_l[i] = at
            at += nb_l[i]
        out = self.buffers.take(at)
        dst = np.array(dst_l, dtype=np.int64)
        mv, local, types, remote = memoryview(out), self._local, [], False
        k, n_rec = 0, len(order)
        while k < n_rec:  # one run of records an owner
            o = owners[order[k]]
            j = k + 1
            while j < n_rec and owners[order[j]] == o:
                j += 1
            grp = order[k:j]
            k = j
            if o == rank:
                for i in grp:
                    d, n, s = dst_l[i], nb_l[i], src_l[i]
                    mv[d:d + n] = local[s:s + n]
            else:
                remote = True
                self._get_owner(mv, o, dst_l[grp[0]], [nb_l[i] for i in grp],
                                [src_l[i] for i in grp], types)
        if remote:  # an all-local step makes no MPI call, as the numpy path
            self._flush(types)
        return Fetched(ids, out, dst, nb)

    def _get_remote(self, out, owners, order, src, nb, dst) -> None:
        """The numpy path's Gets: one :meth:`_get_owner` a remote owner's run, one flush. (This
        rank's own run by one indexed Get from its own window was tried and is slower than the
        Python copies: ``local_get`` in bench/fetch/profile.py, docs/gpu-feeding.md.)"""
        sorted_owners = owners[order]
        bounds = np.flatnonzero(sorted_owners[1:] != sorted_owners[:-1]) + 1
        types = []
        for grp in np.split(order, bounds):
            o = int(owners[grp[0]])
            if o != self.rank:
                self._get_owner(out, o, int(dst[grp[0]]), nb[grp].tolist(), src[grp].tolist(),
                                types)
        self._flush(types)

    def _get_owner(self, out, o: int, lo: int, sizes: list, srcs: list, types: list) -> None:
        """ONE Get of owner `o`'s records (byte offsets `srcs` and lengths `sizes` in its window,
        Python lists) landing contiguously at ``out[lo:]``: a plain Get for one record, an
        ``hindexed`` target datatype for several (appended to `types`, freed by :meth:`_flush`);
        several Gets when they pass ``MDLOADER_MPI_MAX_COUNT`` bytes
        (:func:`~mdloader_plugin.mpi.collectives.get_records`). The bytes are counted as they
        are asked for (:attr:`traffic`, no per-step bincount; none for this rank's own window)."""
        n = get_records(self.win, out, lo, o, sizes, srcs, types)
        if o != self.rank:
            self.traffic["off_node" if self._off_node[o] else "on_node"] += n

    def _flush(self, types: list) -> None:
        """Complete every Get of the step (one ``Flush_all``) and free its datatypes."""
        self.win.Flush_all()
        for t in types:
            t.Free()

    def close(self) -> None:
        if self._progress is not None:
            self._progress.close()
            self._progress = None
        if self.size > 1 and self.win is not None:
            self.store.close_epoch()
            self.win = None
