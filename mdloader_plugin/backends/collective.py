"""Collective backend: one ``MPI_Alltoallv`` a step in which owners push what others need.

The step of every rank is known everywhere (the schedule is a pure function of seed, epoch and
step) and so are all record sizes (the global index): send and receive counts are computed
locally, there is no request round. A rank never builds the world's ``[P, b]`` table: its sends
(which of its own samples each rank takes this step) come from the epoch order's inverse over
its block, a function of the sampling layer the backend is handed at construction (``sends``:
:meth:`mdloader_plugin.sampling.planner.RankPlanner.sends`), ``O(b)`` a step (a plan made from a
whole table brings its sends along); the only ``O(P)`` arrays are
the counts and displacements ``Alltoallv`` itself needs, built by ``bincount``/``cumsum``. Owners
pack the records each destination needs (a memcpy a record), one Alltoallv moves them, and the
receiver reads its records in place, grouped by owner. A pair message over
``MDLOADER_MPI_MAX_COUNT / P`` bytes (2 GiB / P by default) travels point to point beside it, in
pieces (:func:`~mdloader_plugin.mpi.collectives.alltoallv_big`), so no count or displacement passes
``2**31`` on an MPI-3.1 library.

Cost: ``t_sync(P) + (P - 1) * t_peer + max_rank_bytes / bw`` — it grows with the number of ranks
(every rank takes part, even with nothing to send) and is bound by the most loaded rank, so it wins
at large batches and few ranks. Every rank must call ``fetch`` for the same steps in the same
order (the loader guarantees it, also when an iteration is abandoned).

Progress thread across nodes (``MDLOADER_COLL_PROGRESS_THREAD``, see :func:`wants_progress_thread`):
over TCP a rank's incoming Alltoallv fragments are only read while that rank is inside MPI; ranks
reach the exchange at different times (each packs, decodes and collates on its own), so without a
thread the early ranks' data waits in socket buffers while the late ones compute. The same
process's poller (:mod:`~..mpi.progress`) the one-sided backend uses keeps reading them. Measured on
the emulated cluster (``bench/fetch/coll_progress.py``, step to a ready batch, interleaved in
one job, a shared and loaded 2-core machine): one rank a host, 1.15-1.57x faster with the thread (4
hosts at 300mbit, 3 hosts at 500mbit, molecules and OC20 slabs, batch 2-64); 3 ranks a host at
100mbit, 0.90-1.11x (link-bound). Not the 2x an earlier run saw, but real where ranks are few a
host: on across nodes by default. The backend ``auto`` does not serve holds no lease on the poller
(:meth:`CollectiveBackend.set_active`).
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

import numpy as np

from ..core.errors import internal
from ..mpi import progress as _progress
from ..mpi.collectives import alltoallv_big, max_count
from .base import Backend, BufferPool, Fetched, exclusive_cumsum, gather_local

SMALL_STEP = 64    # records received and sent a step up to which the step is planned on lists
SMALL_RANKS = 64   # ... on at most this many ranks (the counts are P-long lists: O(P) in Python)


class CollectiveBackend(Backend):
    """One ``Alltoallv`` a step: owners pack the records every rank needs (sizes from the
    index; every rank knows every plan, so there is no request round) and each rank reads its
    own records in place.

    `sends`: ``(epoch, step) -> (ids, dest)``, this rank's own records every rank takes at a
    step, grouped by destination (the loader hands its planner's
    :meth:`~mdloader_plugin.sampling.planner.RankPlanner.sends`: the epoch's inverse over this
    rank's block). Without it only plans that carry their sends can be fetched (a whole table,
    :meth:`~mdloader_plugin.sampling.planner.StepPlan.from_table`)."""

    name = "collective"

    def __init__(self, store, world, progress="auto", sends=None, **_):
        super().__init__(store, world)
        self.sends = sends
        self._progress = None
        self._sends = BufferPool(slots=1)  # send buffers, reused: no allocation (nor, for
        # multi-MiB steps, a page fault every 4 KiB) a step
        if self.size > 1:
            from mpi4py import MPI

            self._MPI = MPI
            self.comm = world.comm
            self._off_node = (world.node_of != world.node_of[self.rank]).tolist()
            self._local = memoryview(store.buffer).cast("B")  # the store's records: unmoved
            # P + 1 ints for the small steps' owners (only where they run: P <= 64)
            self._starts = store.block_starts.tolist() if self.size <= SMALL_RANKS else None
            self._progress = _progress.start(
                world, wants_progress_thread(world, progress), "collective",
                "so Alltoallv fragments are read while ranks pack and decode "
                "(MDLOADER_COLL_PROGRESS_THREAD=0 turns it off)",
                "Alltoallv steps across nodes may be slower")

    def set_active(self, active: bool) -> None:
        if self._progress is not None:
            (self._progress.resume if active else self._progress.pause)()

    def close(self) -> None:
        if self._progress is not None:
            self._progress.close()
            self._progress = None

    def _fetch(self, plan) -> Fetched:
        if self._progress is not None:
            self._progress.fetching()  # the first fetch takes the process's poller
        st = self.store
        ids = plan.ids
        if 1 < self.size <= SMALL_RANKS and ids.size <= SMALL_STEP:
            wanted, dest = self._sends_of(plan)
            if wanted.size <= SMALL_STEP:
                return self._fetch_small(ids, wanted, dest)
        nb = st.nbytes[ids]
        owners = st.owner_of(ids)
        order = np.argsort(owners, kind="stable")
        dst = np.empty(ids.size, dtype=np.int64)
        dst[order] = exclusive_cumsum(nb[order])
        out = self.buffers.take(int(nb.sum()))
        if self.size == 1:
            gather_local(st.buffer, st.offsets[ids], nb, out, dst)
            return Fetched(ids, out, dst, nb)
        recvcounts = np.bincount(owners, weights=nb, minlength=self.size).astype(np.int64)
        sendbuf, sendcounts = self._pack(*self._sends_of(plan))
        self._count(recvcounts)
        alltoallv_big(self.comm, sendbuf, sendcounts, out, recvcounts)
        self._sends.give(sendbuf)
        return Fetched(ids, out, dst, nb)

    def _sends_of(self, plan) -> tuple[np.ndarray, np.ndarray]:
        """`plan`'s sends: those it carries (a whole table's, scanned), else the epoch inverse's
        slice of its step (``self.sends``, the planner's, in ``sampling/planner.py``)."""
        if plan.sends is not None:
            return plan.sends
        if self.sends is None:
            raise internal("a collective fetch of a plan without sends, and no sends were "
                           "handed to the backend")
        plan.sends = self.sends(plan.epoch, plan.step)  # kept with the plan
        return plan.sends

    def _pack(self, wanted: np.ndarray, dest: np.ndarray):
        """This rank's records the others take (`wanted`, grouped by destination `dest`, in
        their plan order: :meth:`_sends_of`), packed, and the bytes for each rank."""
        st = self.store
        nb = st.nbytes[wanted]
        sendbuf = self._sends.take(int(nb.sum()))
        gather_local(st.buffer, st.offsets[wanted], nb, sendbuf, exclusive_cumsum(nb))
        counts = np.bincount(dest, weights=nb, minlength=self.size).astype(np.int64)
        return sendbuf, counts


    def _fetch_small(self, ids, wanted, dest) -> Fetched:
        """The same step as the numpy path (same layout: records grouped by owner, ascending,
        plan order inside an owner; the same single ``Alltoallv``), planned on Python lists. A
        step of a few records pays per call, not per byte: the numpy path's ~25 small numpy calls
        (sizes, offsets, grouping, counts, displacements, packing, traffic) cost more than the
        exchange itself on two ranks, where DDStore's compiled ``get_batch`` (three collectives)
        had none of them (bench/ddstore/batched.py). One index lookup serves the received and
        the sent records; owners come from the block starts by bisection."""
        st, rank, MPI, k = self.store, self.rank, self._MPI, ids.size
        both = st.nbytes[np.concatenate((ids, wanted))]  # one call: ~5 us each on a compact index
        nb_l, w_nb = both[:k].tolist(), both[k:].tolist()
        starts = self._starts
        own_l = [bisect_right(starts, i) - 1 for i in ids.tolist()]
        order = sorted(range(k), key=own_l.__getitem__)  # stable: plan order inside an owner
        dst_l, recv, at = [0] * k, [0] * self.size, 0
        for i in order:
            dst_l[i] = at
            n, o = nb_l[i], own_l[i]
            at += n
            recv[o] += n
            if o != rank:
                self.traffic["off_node" if self._off_node[o] else "on_node"] += n
        out = self.buffers.take(at)
        w_src = st.offsets[wanted].tolist() if wanted.size else []
        sendbuf, send = self._sends.take(sum(w_nb)), [0] * self.size
        mv, local, at = memoryview(sendbuf), self._local, 0
        for s, n, d in zip(w_src, w_nb, dest.tolist()):
            mv[at:at + n] = local[s:s + n]
            at += n
            send[d] += n
        if max(max(send), max(recv)) <= max_count() // self.size:  # no count past 2**31
            self.comm.Alltoallv([sendbuf, (send, [0, *accumulate(send[:-1])]), MPI.BYTE],
                                [out, (recv, [0, *accumulate(recv[:-1])]), MPI.BYTE])
        else:  # a few records of over 2 GiB / P: in pieces
            alltoallv_big(self.comm, sendbuf, np.array(send), out, np.array(recv))
        self._sends.give(sendbuf)
        return Fetched(ids, out, np.array(dst_l, dtype=np.int64), both[:k])


def wants_progress_thread(world, setting="auto") -> bool:
    """``"auto"``: when ranks span several nodes, unless ``MDLOADER_COLL_PROGRESS_THREAD=0``
    (``=1`` forces one on one node too); a bool `setting` wins."""
    if setting != "auto":
        return bool(setting)
    return _progress.env_switch("MDLOADER_COLL_PROGRESS_THREAD",
                                world is not None and world.num_nodes > 1)
