"""One rank's real per-step loader work for a job of P ranks, in one process
(``mdloader rank-cost``).

What runs is the loader's own code for one rank (by default the middle rank, ``P // 2``): the
schedule and its order (``auto``: torch up to 4M samples, feistel above), the rank's step plans
(:mod:`mdloader_plugin.sampling.planner`: its row, and for the collective backend its sends
from the epoch's inverse), a real compact index of ``N`` samples (``nbytes``, ``offsets`` and
``owner_of`` of the step's ids), the grouping by owner, the packing of the records this rank
sends, the counts ``Alltoallv`` needs, and the column-wise PyG batch of its records. Only the
network is replaced: the bytes a Get or an ``Alltoallv`` would bring are copied locally, the same
number of bytes a record, from a pool of real encoded records (record ``i`` holds pool record
``i mod K``: the index's sizes are the pool's, so every copied record decodes). With
``Job.sizes`` (``--sizes``: a data set's record sizes, tiled to ``N``) the index holds those sizes
and the grouping, packing and copies move as many bytes a record as they say (read from the
pool's bytes); the batch is then built from pool record ``i mod K`` itself (its molecule, not one
of the file's shapes), and ``atoms`` weights are still the pool's.

Times are thread CPU seconds (``time.thread_time``), per phase: ``plan`` (row and sends),
``group_pack`` (index lookups, owner grouping, packing and counts), ``copy`` (the transfer's
bytes), ``batch`` (the PyG batch). ``epoch_start_s`` is the epoch's order plus, where the step
needs it, its inverse over the rank's block. ``bytes_per_sample`` is the N-proportional state a
rank holds (index, order, step plans) over N. ``legacy=True`` runs the code before per-rank
step plans (the whole ``[P, b]`` table a step, scanned; weights balanced over the whole world):
:class:`.reference.LegacyRankCost`, loaded only then (``RankCost(job)`` gives one).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..backends.base import Fetched, gather_local
from ..batching.pyg import ColumnCollate, pyg_collate, pyg_sample
from ..core.blocks import block_bounds, exclusive_offsets
from ..core.errors import ConfigError, internal
from ..records import codec
from ..sampling.mixes import DataSets, get_mix
from ..sampling.planner import StepPlan
from ..sampling.schedule import Schedule
from ..sources import synth
from ..store.index import (CompactIndex, checkpoints, code_dtype, code_params, default_every,
                           encode)

POOL = 64  # distinct real records


@dataclass
class Job:
    """One `mdloader rank-cost` configuration (the CLI's options; `rank`: which rank to run,
    default the middle one; `legacy`: the code before per-rank plans)."""

    ranks: int
    num_samples: int
    batch_size: int = 32
    backend: str = "onesided"
    datasets: int = 1
    group_size: int | None = None
    ranks_per_node: int = 8
    weights: np.ndarray | str | None = None
    steps: int = 50
    drop_last: bool = False
    rank: int | None = None
    seed: int = 0
    legacy: bool = False
    sizes: np.ndarray | None = None  # record sizes (bytes, tiled to num_samples); None: the pool's
    fairchem: bool = False  # the data sets mixed as the fairchem loader mixes them


def check_job(job: Job) -> None:
    """Bad input as one line naming the value and the fix (a ConfigError)."""
    if job.ranks <= 0:
        raise ConfigError(f"--ranks {job.ranks}: a job needs at least 1 rank; give positive "
                          "numbers, e.g. --ranks 64,8192")
    if job.num_samples <= 0:
        raise ConfigError(f"--num-samples {job.num_samples}: give a positive number of samples")
    if job.batch_size <= 0 or job.steps <= 0:
        raise ConfigError(f"--batch-size {job.batch_size} / --steps {job.steps}: both must be "
                          ">= 1")
    if job.drop_last and job.num_samples < job.ranks:
        raise ConfigError(f"--num-samples {job.num_samples} < --ranks {job.ranks} with "
                          "--drop-last leaves ranks without a sample; use more samples or "
                          "fewer ranks")
    if job.group_size is not None and (job.group_size <= 0 or job.ranks % job.group_size):
        raise ConfigError(f"--group-size {job.group_size} does not divide --ranks {job.ranks}; "
                          "choose a divisor of the number of ranks")
    if job.datasets <= 0 or job.datasets > job.num_samples:
        raise ConfigError(f"--datasets {job.datasets}: between 1 and --num-samples")
    if job.backend not in ("onesided", "collective"):
        raise ConfigError(f"--backend {job.backend!r}: choose onesided or collective")
    if isinstance(job.weights, np.ndarray) and job.weights.shape != (job.num_samples,):
        raise ConfigError(f"--weights has {job.weights.size} entries for --num-samples "
                          f"{job.num_samples}; give one weight a sample")


def record_pool(seed: int = 0):
    """``POOL`` real encoded molecules within one byte of size code (a uint8 index code)."""
    recs = [codec.encode(g) for g in synth.generate("hydragnn", seed, 0, 4 * POOL)]
    recs.sort(key=len)
    mid = len(recs) // 2
    recs = recs[mid - POOL // 2:mid + POOL // 2]
    nb = np.array([r.size for r in recs], dtype=np.int64)
    buf = np.concatenate(recs)
    return buf, exclusive_offsets(nb), nb


_CODES: dict = {}  # (n, sizes) -> (sizes, codes, base, unit, every, chk): one build for every P


def synthetic_index(n: int, w: int, sizes: np.ndarray) -> CompactIndex:
    """A real compact index of `n` samples over `w` blocks, sample ``i`` of size
    ``sizes[i mod K]`` (tiled; the first `n` if ``K > n``; no int64 array of N). The codes and
    sparse checkpoints do not depend on the blocks and are kept for the next P (the last N
    only; a large `sizes` is recognised by identity)."""
    key = (n, sizes.tobytes() if sizes.size <= 4096 else id(sizes))
    if key not in _CODES:  # the entry keeps `sizes` alive, so its id is not reused
        _CODES.clear()
        lo, g, hi = code_params(sizes)
        unit = g or 1
        codes = np.tile(encode(sizes, lo, unit, code_dtype((hi - lo) // unit)),
                        -(-n // sizes.size))[:n]
        every = default_every(n)
        chk = None if every == 1 else checkpoints(codes, lo, unit, every, block_bounds(n, 1))
        _CODES[key] = (sizes, codes, lo, unit, every, chk)
    _, codes, lo, unit, every, chk = _CODES[key]
    return CompactIndex(block_bounds(n, w), codes, lo, unit, every, chk)


def mix_for(job: Job):
    """With several data sets: a temperature mix over `job.datasets` uneven data sets summing to
    `job.num_samples` (None for one)."""
    if job.datasets == 1:
        return None
    sizes = np.diff(block_bounds(job.num_samples, job.datasets))
    sizes = sizes * (1 + np.arange(job.datasets)) // job.datasets + 1  # uneven sets
    sizes[-1] += job.num_samples - sizes.sum()
    names = tuple(f"set{d}" for d in range(job.datasets))
    spec = {"type": "temperature", "temperature": 2}
    if job.fairchem:  # each set's fixed seeded permutation, as fairchem's create_dataset
        spec["dataset_seed"] = 0
    return get_mix(spec, DataSets(names, tuple(sizes.tolist())), job.ranks)


class RankCost:
    """One simulated rank of `job` (see the module doc; ``job.legacy``: a
    :class:`~.reference.LegacyRankCost`)."""

    def __new__(cls, job: Job):
        if job.legacy and cls is RankCost:  # the code before per-rank plans: benches, tests
            from .reference import LegacyRankCost

            return super().__new__(LegacyRankCost)
        return super().__new__(cls)

    def __init__(self, job: Job):
        check_job(job)
        self.job = job
        p, w = job.ranks, job.group_size or job.ranks
        self.rank = p // 2 if job.rank is None else job.rank
        self.r0 = self.rank - self.rank % w
        g = self.rank - self.r0
        self.pool, self.pool_off, self.pool_nb = record_pool(job.seed)
        sizes = self.pool_nb if job.sizes is None else np.asarray(job.sizes, dtype=np.int64)
        self.index = synthetic_index(job.num_samples, w, sizes)
        self.mean_bytes = float(sizes[:job.num_samples].mean())
        # the bytes a record is read from: the pool, long enough for the largest size given
        self.src = self.pool if job.sizes is None else np.resize(
            self.pool, self.pool.size + int(sizes.max()))
        self.lo, self.hi = int(self.index.block_starts[g]), int(self.index.block_starts[g + 1])
        self.g, self.w = g, w
        weights = job.weights
        if isinstance(weights, str):  # atoms of each record: the pool's
            atoms = np.array([codec.decode(self.pool, int(o), int(n))["x"].shape[0]
                              for o, n in zip(self.pool_off, self.pool_nb)], dtype=np.int16)
            weights = np.tile(atoms, -(-job.num_samples // POOL))[:job.num_samples]
        self.schedule = Schedule(job.num_samples, p, job.batch_size, seed=job.seed,
                                 drop_last=job.drop_last, weights=weights, mix=mix_for(job),
                                 **self.balance(job))
        self.planner = self.schedule.planner(self.rank, self.lo, self.hi, self.r0, w)
        self.collate = ColumnCollate(pyg_sample, pyg_collate)

    def balance(self, job: Job) -> dict:
        """The schedule's balance blocks (the defaults)."""
        return {}

    def epoch_start(self, epoch: int) -> float:
        t = time.thread_time()
        self.schedule.epoch_order(epoch)
        if self.job.backend == "collective" and not self.planner.forward:
            self.planner.inverse(epoch)
        return time.thread_time() - t

    def plan(self, epoch: int, step: int) -> StepPlan:
        """This rank's step plan (collective: with its sends, as the backend asks for them)."""
        sp = self.planner.step(epoch, step)
        if self.job.backend == "collective":
            sp.sends = self.planner.sends(epoch, step)
        return sp

    def step(self, epoch: int, step: int) -> dict:
        t0 = time.thread_time()
        sp = self.plan(epoch, step)
        t1 = time.thread_time()
        ids, idx = sp.ids, self.index
        nb, src, owners = idx.nbytes[ids], idx.offsets[ids], idx.owner_of(ids)
        order = np.argsort(owners, kind="stable")
        dst = np.empty(ids.size, dtype=np.int64)
        dst[order] = exclusive_offsets(nb[order])
        out = np.empty(int(nb.sum()), dtype=np.uint8)
        pool_src = self.pool_off[ids % POOL]
        if self.job.backend == "collective":
            wanted, dest = sp.sends
            nbw = idx.nbytes[wanted]
            idx.offsets[wanted]  # the owner's lookup of where its records lie
            sendbuf = np.empty(int(nbw.sum()), dtype=np.uint8)
            gather_local(self.src, self.pool_off[wanted % POOL], nbw, sendbuf,
                         exclusive_offsets(nbw))
            sendcounts = np.bincount(dest, weights=nbw, minlength=self.w).astype(np.int64)
            recvcounts = np.bincount(owners, weights=nb, minlength=self.w).astype(np.int64)
            exclusive_offsets(sendcounts), exclusive_offsets(recvcounts)  # Alltoallv's displs
        else:
            srt = owners[order]
            bounds = np.flatnonzero(srt[1:] != srt[:-1]) + 1
            for grp in np.split(order, bounds):  # one Get an owner: its hindexed lists
                nb[grp].tolist(), src[grp].tolist()
        t2 = time.thread_time()
        gather_local(self.src, pool_src, nb, out, dst)  # the transfer, as local copies
        t3 = time.thread_time()
        got = Fetched(ids, out, dst, nb) if self.job.sizes is None else \
            Fetched(ids, self.pool, pool_src, self.pool_nb[ids % POOL])  # the file's sizes
        batch = self.collate(got)
        t4 = time.thread_time()
        if batch is None:
            raise internal("the pool's records did not batch")
        return {"plan": t1 - t0, "group_pack": t2 - t1, "copy": t3 - t2, "batch": t4 - t3}

    def state_bytes(self) -> int:
        """N-proportional bytes this rank holds: index, order (and mix), step plans kept."""
        return int(self.index.memory_bytes()["index_bytes"] + self.schedule.order_bytes
                   + self.planner.nbytes)

    def structures(self) -> dict:
        """Bytes of every per-rank structure that grows with N or P, by name (the real
        objects; ``records`` from the mean record size)."""
        p, n = self.job.ranks, self.job.num_samples
        mem = self.index.memory_bytes()
        return {"index (compact codes + checkpoints + block starts)": int(mem["index_bytes"]),
                "order (torch list / feistel keys)": int(self.schedule.order_bytes),
                **{f"plan: {k}": v for k, v in self.planner.memory().items()},
                "alltoallv counts + displacements (4 x P int64)": 4 * 8 * self.w
                if self.job.backend == "collective" else 0,
                "node of every rank (P int64)": 8 * p,
                "records (own block)": int((self.hi - self.lo) * self.mean_bytes),
                "N": n, "P": p}

    def run(self) -> dict:
        job, epoch = self.job, 1
        start = self.epoch_start(epoch)
        steps = self.schedule.steps_in(epoch)
        first = min(steps // 3, max(steps - job.steps - 2, 0))  # inside the epoch
        picks = [first + k for k in range(min(job.steps + 2, steps))]
        phases = [self.step(epoch, s) for s in picks][2:] or [self.step(epoch, picks[-1])]
        tot = np.array([sum(p.values()) for p in phases]) * 1e3
        return {"ranks": job.ranks, "backend": job.backend, "datasets": job.datasets,
                "batch_size": job.batch_size, "num_samples": job.num_samples,
                "group_size": self.w, "weights": job.weights is not None,
                "code": "legacy" if job.legacy else "new",
                "sizes": "pool" if job.sizes is None else "file",
                "record_bytes_mean": self.mean_bytes,
                "step_cpu_ms_median": float(np.median(tot)),
                "step_cpu_ms_p95": float(np.percentile(tot, 95)),
                "phases_ms": {k: float(np.median([p[k] for p in phases]) * 1e3)
                              for k in phases[0]},
                "bytes_per_sample": self.state_bytes() / job.num_samples,
                "epoch_start_s": start, "steps_measured": len(phases)}
