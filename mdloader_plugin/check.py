"""End-to-end check: every backend serves the same bytes, and every sample the right number of times.

For each epoch, step and rank the checker fetches the batch through a real :class:`MDLoader`
(prefetch thread and all) with each backend, re-encodes every decoded sample (encoding is
deterministic, so this reproduces the record only if fetch and decode were exact) and compares its
digest with the owner's digest of that sample id; backends are compared with each other step by
step. Across ranks, the ids served in an epoch must cover the data set exactly once (``drop_last``:
at most once, ``P * floor(N / P)`` in all) or, with padding, every sample at least once and
``P * ceil(N / P)`` in all. With replica groups (:mod:`.groups`) the same holds for every group
size, and ``mdloader check --group-size 1,2,4`` compares the batches of the group sizes with each
other (``served``) and reports the bytes that crossed a node (``traffic``). With several data sets
and a sampling rule (``sampling``) the epoch is the rule's expanded list (:mod:`.sampling`): every
sample must be served exactly as many times as that list holds it (each repeat counted), plus the
padding or minus the dropped tail.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from . import codec


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
              traffic: dict | None = None, sampling=None) -> tuple[Mismatch | None, int]:
    """Collective. Returns (first mismatch on this rank or None, number of batches checked).

    `served`, if given, receives this rank's per-step digests under ``(epoch, backend)``;
    `traffic` adds up the bytes the backends received on and off this rank's node; `sampling`
    is the data-set mix (:mod:`.sampling`) of a store over several files."""
    from .loader import MDLoader

    world = store.world
    rank = 0 if world is None else world.rank
    loaders = {b: MDLoader(store, batch_size=batch_size, shuffle=shuffle, seed=seed,
                           drop_last=drop_last, backend=b, prefetch=prefetch,
                           to_sample=codec.encode, collate=list, name=f"check-{b}",
                           sampling=sampling)
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
    core = loader.sampler_core
    if len(got) != core.steps_per_epoch:
        return Mismatch(epoch, len(got), rank, -1,
                        f"backend {name} served {len(got)} of {core.steps_per_epoch} steps")
    for step, dig in enumerate(got):
        ids = core.plan(epoch, step)[rank]
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
    core = loader.sampler_core
    mine = np.concatenate([core.plan(epoch, s)[rank] for s in range(core.steps_per_epoch)])
    counts = np.bincount(mine, minlength=store.num_samples).astype(np.int64)
    world = store.world
    if world is not None and world.size > 1:
        from mpi4py import MPI

        world.comm.Allreduce(MPI.IN_PLACE, counts, op=MPI.SUM)
    n, total = store.num_samples, core.total_size
    if core.mix is not None:
        return _as_expanded(core, epoch, rank, counts)
    if int(counts.sum()) != total:
        return Mismatch(epoch, -1, rank, -1, f"{int(counts.sum())} samples served, expected {total}")
    if core.drop_last and counts.max() > 1:
        s = int(np.argmax(counts))
        return Mismatch(epoch, -1, rank, s, f"served {counts[s]} times with drop_last")
    if not core.drop_last:
        missing = np.flatnonzero(counts == 0)
        if missing.size:
            return Mismatch(epoch, -1, rank, int(missing[0]), "never served in the epoch")
        if int((counts - 1).sum()) != total - n:
            return Mismatch(epoch, -1, rank, -1, "more repeats than padding explains")
    return None


def _as_expanded(core, epoch: int, rank: int, counts: np.ndarray) -> Mismatch | None:
    """Counts over all ranks against the mix's expanded epoch list (padded by repeating its head,
    or cut to the dealt length with drop_last)."""
    order = core.mix.order(core.seed, epoch, core.shuffle)
    total = core.total_size
    dealt = np.concatenate([order, np.tile(order, -(-total // order.size))])[:total]
    want = np.bincount(dealt, minlength=counts.size)
    if not np.array_equal(counts, want):
        s = int(np.flatnonzero(counts != want)[0])
        return Mismatch(epoch, -1, rank, s, f"served {counts[s]} times, the expanded epoch "
                        f"({core.mix.name}) holds it {want[s]} times")
    return None
