"""Collective backend: one ``MPI_Alltoallv`` a step in which owners push what others need.

The plan of every rank is known everywhere (the sampler is a pure function of seed, epoch and
step) and so are all record sizes (the global index): send and receive counts are computed
locally, there is no request round. A rank never builds the world's ``[P, b]`` table: its sends
(which of its own samples each rank takes this step) come from the epoch order's inverse over
its block (:mod:`mdloader_plugin.sampling.plan`), ``O(b)`` a step; the only ``O(P)`` arrays are
the counts and displacements ``Alltoallv`` itself needs, built by ``bincount``/``cumsum``. Owners pack the records each destination needs (a memcpy a
record), one Alltoallv moves them, and the receiver reads its records in place, grouped by owner.

Cost: ``t_sync(P) + (P - 1) * t_peer + max_rank_bytes / bw`` — it grows with the number of ranks
(every rank takes part, even with nothing to send) and is bound by the most loaded rank, so it wins
at large batches and few ranks. Every rank must call ``fetch`` for the same steps in the same
order (the loader guarantees it, also when an iteration is abandoned).

Progress thread across nodes (``MDLOADER_COLL_PROGRESS_THREAD``, see :func:`wants_progress_thread`):
over TCP a rank's incoming Alltoallv fragments are only read while that rank is inside MPI; ranks
reach the exchange at different times (each packs, decodes and collates on its own), so without a
thread the early ranks' data waits in socket buffers while the late ones compute. The same
process's poller (:mod:`~..mpi.progress`) the one-sided backend uses keeps reading them. Measured on
the emulated cluster (``bench/probes/coll_progress.py``, step to a ready batch, interleaved in
one job, a shared and loaded 2-core machine): one rank a host, 1.15-1.57x faster with the thread (4 hosts at
300mbit, 3 hosts at 500mbit, molecules and OC20 slabs, batch 2-64); 3 ranks a host at 100mbit,
0.90-1.11x (link-bound). Not the 2x an earlier run saw, but real where ranks are few a host: on
across nodes by default. The backend ``auto`` does not serve holds no lease on the poller
(:meth:`set_active`).
"""

from __future__ import annotations

import numpy as np

from ..mpi import progress as _progress
from .base import Backend, Fetched, exclusive_cumsum, gather_local


class CollectiveBackend(Backend):
    """One ``Alltoallv`` a step: owners pack the records every rank needs (sizes from the
    index; every rank knows every plan, so there is no request round) and each rank reads its
    own records in place."""

    name = "collective"

    def __init__(self, store, world, progress="auto", **_):
        super().__init__(store, world)
        self._progress = None
        if self.size > 1:
            from mpi4py import MPI

            self._MPI = MPI
            self.comm = world.comm
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
        sendbuf, sendcounts = self._pack(*plan.sends())
        self._count(recvcounts)
        MPI = self._MPI
        self.comm.Alltoallv(
            [sendbuf, (sendcounts, exclusive_cumsum(sendcounts)), MPI.BYTE],
            [out, (recvcounts, exclusive_cumsum(recvcounts)), MPI.BYTE])
        return Fetched(ids, out, dst, nb)

    def _pack(self, wanted: np.ndarray, dest: np.ndarray):
        """This rank's records the others take (`wanted`, grouped by destination `dest`, in
        their plan order: :meth:`StepPlan.sends`), packed, and the bytes for each rank."""
        st = self.store
        nb = st.nbytes[wanted]
        sendbuf = np.empty(int(nb.sum()), dtype=np.uint8)
        gather_local(st.buffer, st.offsets[wanted], nb, sendbuf, exclusive_cumsum(nb))
        counts = np.bincount(dest, weights=nb, minlength=self.size).astype(np.int64)
        return sendbuf, counts


def wants_progress_thread(world, setting="auto") -> bool:
    """``"auto"``: when ranks span several nodes, unless ``MDLOADER_COLL_PROGRESS_THREAD=0``
    (``=1`` forces one on one node too); a bool `setting` wins."""
    if setting != "auto":
        return bool(setting)
    return _progress.env_switch("MDLOADER_COLL_PROGRESS_THREAD",
                                world is not None and world.num_nodes > 1)
