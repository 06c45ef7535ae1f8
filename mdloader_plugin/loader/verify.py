"""End-to-end check: every backend serves the same bytes, and every sample the right number of
times.

For each epoch, step and rank the checker fetches the batch through a real :class:`MDLoader`
(prefetch thread and all) with each backend, re-encodes every decoded sample (encoding is
deterministic, so this reproduces the record only if fetch and decode were exact) and compares its
digest with the owner's digest of that sample id; backends are compared with each other step by
step. Across ranks, the ids served in an epoch must cover the data set exactly once (``drop_last``:
at most once, ``P * floor(N / P)`` in all) or, with padding, every sample at least once and
``P * ceil(N / P)`` in all; that count is exact and ``O(N / P)`` a rank (:func:`coverage`: ids
routed to the rank counting their block of the id space). With replica groups
(:mod:`mdloader_plugin.mpi.groups`) the same holds for every group size, and
``mdloader check --group-size 1,2,4`` compares the batches of the group sizes with each other
(``served``) and reports the bytes that crossed a node (``traffic``). With several data sets and a
sampling rule (``sampling``) the epoch is the rule's expanded list
(:mod:`mdloader_plugin.sampling.mixes`): every sample must be served exactly as many times as that
list holds it (each repeat counted), plus the padding or minus the dropped tail.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from ..core.blocks import block_bounds
from ..mpi.collectives import alltoallv_big
from ..records import codec
from .loader import MDLoader


@dataclass
class Mismatch:
    """The first difference ``mdloader check`` found: where (epoch, step, rank, sample) and what."""

    epoch: int
    step: int
    rank: int
    sample: int
    what: str

    def __str__(self) -> str:
        return (f"epoch {self.epoch} step {self.step} rank {self.rank} sample {self.sample}: "
                f"{self.what}")


def _digest(rec: np.ndarray) -> int:
    return int.from_bytes(hashlib.blake2b(memoryview(rec), digest_size=8).digest(), "little")


def run_check(store, backends: list[str], *, batch_size: int, epochs: int, seed: int,
              shuffle: bool = True, drop_last: bool = False, prefetch: int = 2,
              progress=None, served: dict | None = None,
              traffic: dict | None = None, sampling=None,
              order: str = "auto") -> tuple[Mismatch | None, int]:
    """Collective. Returns (first mismatch on this rank or None, number of batches checked).

    `served`, if given, receives this rank's per-step digests under ``(epoch, backend)``;
    `traffic` adds up the bytes the backends received on and off this rank's node; `sampling`
    is the data-set mix (:mod:`mdloader_plugin.sampling.mixes`) of a store over several files;
    `order` the epoch permutation (:mod:`mdloader_plugin.sampling.order`)."""
    world = store.world
    rank = 0 if world is None else world.rank
    loaders = {b: MDLoader(store, batch_size=batch_size, shuffle=shuffle, seed=seed,
                           drop_last=drop_last, backend=b, prefetch=prefetch,
                           to_sample=codec.encode, collate=list, name=f"check-{b}",
                           sampling=sampling, order=order)
               for b in backends}
    first, checked = None, 0
    try:
        for epoch in range(epochs):
            ref: list[np.ndarray] | None = None
            for name, loader in loaders.items():
                loader.set_epoch(epoch)
                got = [np.array([_digest(r) for r in batch], dtype=np.uint64) for batch in loader]
                checked += len(got)
                if progress is not None:
                    progress(epoch, name)
                first = first or _compare(store, loader, epoch, rank, got, ref, name)
                ref = ref if ref is not None else got
                if served is not None:
                    served[(epoch, name)] = got
            first = first or _exactly_once(store, loaders[backends[0]], epoch, rank)
    finally:
        for loader in loaders.values():
            for k, v in loader.traffic().items():
                if traffic is not None:
                    traffic[k] = traffic.get(k, 0) + v
            loader.close()
    return first, checked


def compare_served(ref: dict, got: dict, rank: int, what: str) -> Mismatch | None:
    """The first step whose digests differ between two ``served`` records (same keys)."""
    for (epoch, name), steps in ref.items():
        for step, (a, b) in enumerate(zip(steps, got[(epoch, name)])):
            if not np.array_equal(a, b):
                return Mismatch(epoch, step, rank, -1, f"backend {name}: {what}")
    return None


def _compare(store, loader, epoch, rank, got, ref, name) -> Mismatch | None:
    core = loader.schedule
    if len(got) != core.steps_per_epoch:
        return Mismatch(epoch, len(got), rank, -1,
                        f"backend {name} served {len(got)} of {core.steps_per_epoch} steps")
    me = core.planner(rank)  # this rank's row only: O(b) a step whatever the number of ranks
    for step, dig in enumerate(got):
        ids = me.row(epoch, step)
        if dig.size != ids.size:
            return Mismatch(epoch, step, rank, -1, f"{name} served {dig.size} samples, "
                            f"expected {ids.size}")
        bad = np.flatnonzero(dig != store.digests[ids])
        if bad.size:
            return Mismatch(epoch, step, rank, int(ids[bad[0]]),
                            f"backend {name} returned bytes that differ from the owner's record")
        if ref is not None and not np.array_equal(dig, ref[step]):
            i = int(np.flatnonzero(dig != ref[step])[0])
            return Mismatch(epoch, step, rank, int(ids[i]), f"backend {name} differs from the "
                            "first backend")
    return None


def _exactly_once(store, loader, epoch, rank) -> Mismatch | None:
    """Collective: the epoch's ids over all ranks cover the data set as drop_last/pad define."""
    core = loader.schedule
    return coverage(store.world, core, epoch, rank, core.rank_indices(epoch, rank))


def coverage(world, core, epoch: int, rank: int, served: np.ndarray) -> Mismatch | None:
    """Collective: do the ids every rank `served` in `epoch` cover the data set as `core` (a
    :class:`~mdloader_plugin.sampling.schedule.Schedule`) defines? The same answer on every
    rank.

    Exact, and ``O(N / P)`` a rank: the id space is cut into ``P`` blocks (as the store's), each
    rank sends every id it served to the rank counting that id's block (one ``Alltoallv`` of
    ``N / P`` ids a rank), each rank counts its block and checks it (drop_last: at most once;
    padding: at least once; several data sets: as often as the expanded epoch holds it), and
    the served total is one ``Allreduce``. So a duplicated, missing or out-of-range id is found
    and named (the smallest offending id), with no rank holding ``N`` counts or ids."""
    size = 1 if world is None else world.size
    n = int(core.num_ids)
    bounds = block_bounds(n, size)
    mine = np.sort(np.asarray(served, dtype=np.int64))
    cuts = np.searchsorted(mine, bounds)
    outside = mine.size - int(cuts[-1] - cuts[0])
    got = mine[cuts[0]:cuts[-1]] if size == 1 else _route(world.comm, mine, cuts)
    lo, hi = int(bounds[rank]), int(bounds[rank + 1])
    counts = np.bincount(got - lo, minlength=hi - lo)
    local = None
    if outside:
        bad = mine[(mine < 0) | (mine >= n)][0]
        local = (int(bad), f"served id outside 0..{n - 1}")
    else:
        local = _block_problem(core, epoch, counts, lo, hi)
    total = int(mine.size)
    if size > 1:
        total = world.comm.allreduce(total)
        problems = [p for p in world.comm.allgather(local) if p is not None]
        local = min(problems) if problems else None
    if total != core.total_size:
        return Mismatch(epoch, -1, rank, -1, f"{total} samples served, expected "
                        f"{core.total_size}")
    return None if local is None else Mismatch(epoch, -1, rank, *local)


def _route(comm, ids: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Alltoallv: the sorted `ids` between ``cuts[r]`` and ``cuts[r + 1]`` (end to end from 0) go
    to rank ``r`` (as bytes, cut below the MPI count limit:
    :func:`~mdloader_plugin.mpi.collectives.alltoallv_big`)."""
    send = np.diff(cuts).astype(np.int64)
    recv = np.empty_like(send)
    comm.Alltoall(send, recv)
    got = np.empty(int(recv.sum()), dtype=np.int64)
    alltoallv_big(comm, np.ascontiguousarray(ids, dtype=np.int64).view(np.uint8), 8 * send,
                  got.view(np.uint8), 8 * recv)
    return got


def _block_problem(core, epoch: int, counts: np.ndarray, lo: int, hi: int):
    """``(id, what)`` of the first id of the block ``lo..hi-1`` served the wrong number of
    times, or None."""
    if core.mix is not None:
        want = _expanded_counts(core, epoch, lo, hi)
        bad = np.flatnonzero(counts != want)
        if bad.size:
            s = int(bad[0])
            return (lo + s, f"served {counts[s]} times, the expanded epoch ({core.mix.name}) "
                    f"holds it {want[s]} times")
        return None
    if core.drop_last:
        bad = np.flatnonzero(counts > 1)
        return (lo + int(bad[0]), f"served {counts[bad[0]]} times with drop_last") \
            if bad.size else None
    bad = np.flatnonzero(counts == 0)
    return (lo + int(bad[0]), "never served in the epoch") if bad.size else None


def _expanded_counts(core, epoch: int, lo: int, hi: int) -> np.ndarray:
    """How often ids ``lo..hi-1`` occur in the mix's expanded epoch list dealt to
    ``core.total_size`` entries (padded by repeating it from its head, or cut with drop_last):
    from the order's inverse over the block, ``O(N / P)`` (no list of the epoch)."""
    order = core.epoch_order(epoch)
    laps, rest = divmod(core.total_size, order.num_samples)
    pos, ids = order.positions_in(lo, hi)
    ids = ids - lo
    return laps * np.bincount(ids, minlength=hi - lo) + \
        np.bincount(ids[pos < rest], minlength=hi - lo)
