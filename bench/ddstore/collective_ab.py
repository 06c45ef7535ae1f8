"""Collective against collective, step by step: MDLoader's collective backend (its small-step
path, and the numpy path it replaced at <= 64 records; and ``mdl_loader``, the same backend
through the loader's own step, ``prefetch=0``, its fetch timer: the watchdog's arming and the
fetch) against DDStore 954ef59's collective
``get_batch`` (padded and row layouts), the same plan step interleaved (each step every variant
once, order rotated), every read checked. Fetch only: the backend's ``fetch`` of the step's plan
(its sends included) and DDStore's row ids + ``get_batch``. A step: Barrier, fetch, MAX over ranks.
``_built`` variants (and ``mdl_loader``, whose loader always does) make the step's records into a
batch after the fetch, outside the timer, as a training loop does (``batched.Batches``): where
ranks outnumber cores that work between fetches slows the next fetch, so like for like is
``mdl_loader`` against ``dds_coll_*_built`` (and ``mdl_collective`` against ``dds_coll_*``).

    PYTHONPATH=build/ddstore-954ef59 mpiexec -n 2 python -m mpi4py \\
        -m bench.ddstore.collective_ab --dataset hydragnn --batches 4,32 --steps 300 \\
        --out bench/results/ddstore_coll_ab_n2.json

Reports per variant the median, p10 (steps no rank was descheduled in: the machine's load
shows in the median, not there) and p95, and the median over steps of the per-step ratio of
MDLoader's fetch over DDStore's.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np



def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="hydragnn")
    ap.add_argument("--batches", default="4,32")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out")
    a = ap.parse_args()
    from mpi4py import MPI

    from bench.ddstore.batched import Batches, Checked
    from bench.ddstore.layouts import DDStoreBatched, Reference
    from bench.loaders.compare import DATASETS, WORK
    from bench.harness import rank_mpi, record
    from mdloader_plugin.backends import collective
    from mdloader_plugin.backends.collective import CollectiveBackend
    from mdloader_plugin.core.log import get_logger
    from mdloader_plugin.loader.loader import MDLoader
    from mdloader_plugin.mpi.world import World
    from mdloader_plugin.sampling.reference import ReferenceSchedule as GlobalSampler
    from mdloader_plugin.store.shard import ShardStore

    import torch

    torch.set_num_threads(1)  # the batches the loader builds: one thread a rank, as in training
    world = World.detect()
    comm, rank = world.comm, world.rank
    get_logger(rank).setLevel("WARNING")
    store = ShardStore.from_file(world, str(WORK / f"{a.dataset}-{DATASETS[a.dataset]}.bp"))
    ref = Reference(store, comm)
    be = CollectiveBackend(store, world)
    dds = {n: DDStoreBatched(store, comm, ref, 0, n, 2 ** round(np.log2(ref.nbytes.mean() / 4)))
           for n in ("pad", "rows")}
    keep = collective.SMALL_STEP
    batches = Batches()
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "dataset": a.dataset,
           "ranks": world.size, "loadavg_start": os.getloadavg()[0], "rows": []}
    for b in [int(x) for x in a.batches.split(",")]:
        core = GlobalSampler(store.num_samples, world.size, b, shuffle=True, seed=0)
        planner = core.planner(rank, *store.local_range, 0, None)
        be.sends = planner.sends  # the epoch inverse's sends of each step (as the loader hands it)
        spe = core.steps_per_epoch

        def mdl(k, small, built=False):
            collective.SMALL_STEP = keep if small else -1
            e, s = divmod(k, spe)
            plan = planner.step(e, s)
            t0 = time.perf_counter()
            f = be.fetch(plan)
            t = time.perf_counter() - t0
            bad = ref.mismatches(f.ids, [f.record(i) for i in range(f.ids.size)])
            if built:
                batches(f)  # the builder copies the records out: the buffer is free again
            be.buffers.give(f.buf)
            return t, bad

        def dd(k, layout, built=False):
            ids = core.plan(*divmod(k, spe))[rank]
            t, rows = dds[layout].fetch(ids)
            bad = dds[layout].check(ids, rows)
            if built:
                batches(dds[layout].fetched(ids, rows))
            return t, bad

        loader = MDLoader(store, batch_size=b, shuffle=True, seed=0, backend="collective",
                          prefetch=0, name="ab")
        check = loader._steps.build = Checked(loader._steps.build, ref)
        it = {"epoch": -1, "iter": None}

        def through_loader(k):
            e = k // spe
            if e != it["epoch"]:
                loader.set_epoch(e)
                it["epoch"], it["iter"] = e, iter(loader)
            before = check.bad
            next(it["iter"])
            expect = core.plan(e, k % spe)[rank]
            wrong = check.bad - before + int(not np.array_equal(check.ids, expect))
            return loader.epoch_stats.step_fetch_s[-1], wrong

        variants = {"mdl_collective": lambda k: mdl(k, True),
                    "mdl_collective_built": lambda k: mdl(k, True, True),
                    "mdl_loader": through_loader,
                    "mdl_collective_numpy": lambda k: mdl(k, False),
                    "dds_coll_pad": lambda k: dd(k, "pad"),
                    "dds_coll_rows": lambda k: dd(k, "rows"),
                    "dds_coll_pad_built": lambda k: dd(k, "pad", True),
                    "dds_coll_rows_built": lambda k: dd(k, "rows", True)}
        names = list(variants)
        times = {n: [] for n in names}
        bad = 0
        for k in range(a.steps + 3):
            order = names[k % len(names):] + names[:k % len(names)]
            for n in order:
                comm.Barrier()
                t, wrong = variants[n](k)
                bad += wrong
                if k >= 3:  # warm-up
                    times[n].append(t)
        collective.SMALL_STEP = keep
        loader.close()
        slow = {}
        for n in names:
            m = np.empty(len(times[n]))
            comm.Allreduce(np.asarray(times[n]), m, op=MPI.MAX)
            slow[n] = m
        for n in names:
            row = {"batch": b, "variant": n, "median_ms": float(np.median(slow[n]) * 1e3),
                   "p10_ms": float(np.percentile(slow[n], 10) * 1e3),
                   "p95_ms": float(np.percentile(slow[n], 95) * 1e3)}
            for d in ("dds_coll_pad", "dds_coll_rows", "mdl_collective", "dds_coll_pad_built",
                      "dds_coll_rows_built"):
                row[f"over_{d}"] = float(np.median(slow[n] / slow[d]))
            out["rows"].append(row)
        out.setdefault("mismatches", 0)
        out["mismatches"] += int(comm.allreduce(bad, op=MPI.SUM))
    out["loadavg_end"] = os.getloadavg()[0]
    for d in dds.values():
        d.close()
    be.close()
    store.close()
    if rank == 0:
        for r in out["rows"]:
            print(f"P={world.size} B={r['batch']} {r['variant']:22s} median {r['median_ms']:8.3f} "
                  f"p10 {r['p10_ms']:7.3f} p95 {r['p95_ms']:8.3f} ms; over pad "
                  f"{r['over_dds_coll_pad']:.2f} rows {r['over_dds_coll_rows']:.2f}; "
                  f"over built pad "
                  f"{r['over_dds_coll_pad_built']:.2f} rows {r['over_dds_coll_rows_built']:.2f}",
                  flush=True)
        print(f"mismatches {out['mismatches']}, load {out['loadavg_start']:.1f}-"
              f"{out['loadavg_end']:.1f}")
        if a.out:
            out["record"] = record(a, mpi=rank_mpi())
            Path(a.out).write_text(json.dumps(out, indent=1))
    world.close()


if __name__ == "__main__":
    main()
