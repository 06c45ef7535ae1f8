"""MPI worker of the backend-choice benchmarks: step time to a ready batch, measured for real.

Runs under ``mpiexec`` (or ``Cluster.run``) with one JSON argument (the job) and writes one JSON
file of rows (rank 0). A *step* is what the trainer pays for a batch: ``next()`` on an
``MDLoader`` with ``prefetch=0`` (fetch, decode, PyG collate), after a barrier, the slowest
rank's time. Every loader is made and closed inside its round, so nothing of one configuration
(a window, a progress thread) runs beside another.

Job keys: ``out``; ``dists`` (``hydragnn``/``oc20``); ``batches``; ``rounds`` (interleaved, the
order of the arms alternating; no new round once ``config_budget_s`` is spent); ``steps`` a
round; ``max_rounds`` and ``seq_budget_s``: after ``rounds``, more interleaved rounds while
:func:`more_rounds` says the two arms are apart but not yet told apart (sequential testing);
``arms``: list of ``{"label", "backend", "env": {...}}`` (env set only while that arm's
loader lives); ``auto``: list of profile paths for which ``backend="auto"`` runs ``auto_steps``
steps and reports its initial and final choice.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

inf = float("inf")

TEMPLATES = 48  # distinct synthetic graphs per rank, cycled (generating thousands costs minutes)


def make_store(world, dist: str, n: int):
    from mdloader_plugin.sources import synth
    from mdloader_plugin.core.blocks import block_bounds
    from mdloader_plugin.store.shard import ShardStore

    lo, hi = (int(x) for x in block_bounds(n, world.size)[world.rank:world.rank + 2])
    kinds = {"hydragnn": "hydragnn", "oc20": "oc20"}
    base = list(synth.generate(kinds[dist], 11, lo, lo + min(TEMPLATES, hi - lo)))
    samples = (base[i % len(base)] for i in range(hi - lo))
    return ShardStore.from_samples(world, samples, n)


def _with_env(env: dict):
    old = {k: os.environ.get(k) for k in env}
    os.environ.update({k: str(v) for k, v in env.items()})
    return old


def _restore(old: dict) -> None:
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def time_steps(world, loader, steps: int, epoch: int, batch: int | None = None) -> list[float]:
    """Max-over-ranks seconds of `steps` next() calls (one warm-up step first, not counted).

    Only full steps count: a step whose batch has fewer than `batch` graphs on some rank (the
    epoch's tail) is not the configuration being measured. Until 2026-12-04 the batch-256 rows
    alternated a full step with a 1-graph tail step (513 samples a rank)."""
    from mpi4py import MPI

    loader.set_epoch(epoch)
    it = iter(loader)
    times = []
    for i in range(steps + 1):
        world.comm.Barrier()
        t = time.perf_counter()
        try:
            b = next(it)
        except StopIteration:
            break
        dt = world.comm.allreduce(time.perf_counter() - t, op=MPI.MAX)
        n = getattr(b, "num_graphs", None)
        full = world.comm.allreduce(int(batch is None or n is None or n >= batch), op=MPI.MIN)
        if i and full:
            times.append(dt)
    return times


def more_rounds(steps: dict[str, list[float]], sizes: dict[str, list[int]],
                within: float | None = None, alpha: float | None = None) -> bool:
    """Sequential testing: does a configuration need another interleaved round? Only while its
    two arms are *apart* (medians more than `within` apart, so a pick could be wrong) and not
    yet *told apart* (the stratified Mann-Whitney test of ``ties.resolve`` over the
    rounds so far does not reject at `alpha`). A winner found or a near-tie ends it; the cap is
    the caller's. Stopping when the test first rejects makes a false winner more likely than
    `alpha` (optional stopping): that can only count more picks wrong, never fewer."""
    from bench.ties import ALPHA, WITHIN, resolve, strata

    within = WITHIN if within is None else within
    alpha = ALPHA if alpha is None else alpha
    if len(steps) != 2 or not all(steps.values()):
        return False
    res = resolve(strata({"steps_s": steps, "round_sizes": sizes}), alpha)
    return res["winner"] is None and res["median_ratio"] > 1 + within


def short_epoch(store, batch: int, steps: int) -> dict | None:
    """An epoch of exactly the warm-up and `steps` full steps, its samples a seeded random subset
    of the whole store (fairchem's ``explicit`` ratio with a data-set permutation), so a step
    reads as cold and scattered as in a big epoch. Closing a collective loader early runs the
    rest of its epoch's exchanges (the ranks' Alltoallvs must stay matched): with the store's
    whole epoch a batch-1 round spent ~40 s draining 3000 steps nobody timed."""
    from mdloader_plugin.sampling.mixes import DataSets

    want = store.world.size * batch * (steps + 1)
    n = store.num_samples
    if want >= n:
        return None
    name = DataSets.of_store(store).names[0]
    return {"type": "explicit", "ratios": {name: (want + 0.5) / n}, "dataset_seed": 7}


def run_arms(world, store, job: dict, batch: int,
             round_sizes: dict | None = None) -> dict[str, list[float]]:
    """Each arm's steps, in round order; `round_sizes` (if given) gets each arm's step count a
    round, so the scoring can compare the arms round by round (drift cancels). After
    ``job["rounds"]`` rounds, more while :func:`more_rounds` (rank 0 decides, every rank
    follows) up to ``max_rounds`` and ``seq_budget_s`` seconds for the configuration."""
    from mdloader_plugin.loader.loader import MDLoader

    arms = job["arms"]
    out: dict[str, list[float]] = {a["label"]: [] for a in arms}
    sizes = round_sizes if round_sizes is not None else {}
    for a in arms:
        sizes[a["label"]] = []
    t0 = time.perf_counter()
    for r in range(max(job["rounds"], job.get("max_rounds", 0))):
        spent = world.comm.bcast(time.perf_counter() - t0, root=0)
        # the first `rounds` unless their budget is spent (every arm has at least one round);
        # then sequential rounds while they are needed and their budget lasts. Rank 0 decides,
        # every rank follows.
        if not (r == 0 or (r < job["rounds"] and spent <= job.get("config_budget_s", inf))) \
                and not world.comm.bcast(world.rank == 0 and len(arms) == 2
                                         and spent < job.get("seq_budget_s", inf)
                                         and more_rounds(out, sizes), root=0):
            break
        for a in (arms if r % 2 == 0 else arms[::-1]):
            old = _with_env(a.get("env", {}))
            try:
                ld = MDLoader(store, batch_size=batch, backend=a["backend"], prefetch=0,
                              seed=r, name=a["label"],
                              sampling=short_epoch(store, batch, job["steps"]))
                got = time_steps(world, ld, job["steps"], r, batch)
                out[a["label"]] += got
                sizes[a["label"]].append(len(got))
                ld.close()
            finally:
                _restore(old)
    return out


def run_auto(world, store, profile: str, batch: int, steps: int) -> dict:
    """What ``backend="auto"`` picks at start and after its online trial (and re-check)."""
    from mdloader_plugin.loader.loader import MDLoader

    ld = MDLoader(store, batch_size=batch, backend="auto", prefetch=0, seed=99, profile=profile,
                  sampling=short_epoch(store, batch, 5))
    first = ld.decision["backend"]
    epoch, served = 0, 0
    while served < steps:
        ld.set_epoch(epoch)
        for _ in ld:
            served += 1
            if served >= steps:
                break
        epoch += 1
    dec = ld.decision
    res = {"model": first, "final": dec["backend"], "reason": dec.get("reason", ""),
           "measured_s": dec.get("measured_s", {}), "steps": served,
           "online_done": ld._online is None or not ld._online.active}
    ld.close()
    return res


def main(job: dict) -> None:
    from mdloader_plugin.mpi.world import World

    world = World.detect()
    rows = []
    for dist in job["dists"]:
        # enough samples a rank for the warm-up and `steps` full steps at the largest batch
        n = world.size * max(job["batches"]) * (job.get("steps", 1) + 1) + world.size
        store = make_store(world, dist, n)
        sizes = store.nbytes
        if job.get("arms"):  # a store's first loaders pay one-off set-up: not in a timed round
            warm = {**job, "rounds": 1, "steps": 1, "config_budget_s": float("inf"),
                    "max_rounds": 0}
            run_arms(world, store, warm, min(job["batches"]))
        for batch in job["batches"]:
            t0 = time.perf_counter()
            load0 = os.getloadavg()  # system-wide (not namespaced): the machine's load
            row = {"dist": dist, "batch": batch, "ranks": world.size,
                   "hosts": world.num_nodes,
                   "ranks_per_host": int(np.bincount(world.node_of).max()),
                   "mean_bytes": float(np.mean(sizes)), "std_bytes": float(np.std(sizes)),
                   "round_sizes": {}}
            row["steps_s"] = (run_arms(world, store, job, batch, row["round_sizes"])
                              if job.get("arms") else {})
            row["auto"] = {p: run_auto(world, store, p, batch, job.get("auto_steps", 40))
                           for p in job.get("auto", [])}
            row["seconds"] = round(time.perf_counter() - t0, 1)
            row["load_avg"] = [round(load0[0], 2), round(os.getloadavg()[0], 2)]  # 1-min, start/end
            row["utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            rows.append(row)
            if world.rank == 0:  # as it goes: a later failure or timeout keeps these rows
                Path(job["out"]).write_text(json.dumps(rows))
                print(f"  {dist} batch {batch}: " + ", ".join(
                    f"{k} {np.median(v) * 1e3:.2f} ms" for k, v in row["steps_s"].items())
                    + f" ({max(map(len, row['round_sizes'].values()), default=0)} rounds)"
                    + "".join(f"; auto[{Path(p).stem}] {a['model']}->{a['final']}"
                              for p, a in row["auto"].items()), flush=True)
        store.close()
    if world.rank == 0:
        Path(job["out"]).write_text(json.dumps(rows))
    world.close()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
