"""Is ``MPICH_ASYNC_PROGRESS`` still needed beside MDLoader's own progress poller?

On the emulated cluster under the MPICH wheel (``mdloader cluster``, ``family="mpich"``), each
arm is one job of ``--hosts`` x ``--ranks-per-host`` ranks: per backend (one-sided, collective)
a loader serves ``--epochs`` epochs of batch ``--batch`` (molecules) to a trainer stand-in that
spends ``--compute-ms`` a step outside MPI (as in a gloo/NCCL allreduce: the owners make no MPI
progress of their own). A step's fetch time (the producer's, ``epoch_stats.step_fetch_s``, all
ranks, the first epoch left out) gives p50 and p95. Arms: MDLoader's poller alone (the default
across nodes), MPICH's async progress thread beside it (``MPIR_CVAR_ASYNC_PROGRESS=1``, what
``MPICH_ASYNC_PROGRESS=1`` turns on), and MPICH's thread alone (the poller off). The
arms run interleaved for ``--rounds`` rounds. Writes ``bench/results/async_progress.json``.

    python -m bench.fetch.async_progress [--rounds 2] [--epochs 3] [--rate 1gbit]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from bench.harness import RESULTS, ROOT, module, record

OUT = RESULTS / "async_progress.json"
OFF = {"MDLOADER_PROGRESS_THREAD": "0", "MDLOADER_COLL_PROGRESS_THREAD": "0"}
ARMS = {"poller": {"MPIR_CVAR_ASYNC_PROGRESS": "0"},
        "poller+mpich_async": {"MPIR_CVAR_ASYNC_PROGRESS": "1"},
        "mpich_async": {"MPIR_CVAR_ASYNC_PROGRESS": "1", **OFF}}
BACKENDS = ("onesided", "collective")


def worker(job: dict) -> None:
    """One arm's job (under mpiexec): every backend's fetch times, gathered on rank 0."""
    from mdloader_plugin.core.blocks import block_bounds
    from mdloader_plugin.loader.loader import MDLoader
    from mdloader_plugin.mpi.world import World
    from mdloader_plugin.records import codec
    from mdloader_plugin.sources import synth
    from mdloader_plugin.store.shard import ShardStore

    world = World.detect()
    n = job["samples"]
    lo, hi = (int(x) for x in block_bounds(n, world.size)[world.rank:world.rank + 2])
    store = ShardStore.from_samples(world, synth.generate("hydragnn", 3, lo, hi), n)
    out = {}
    for backend in BACKENDS:
        loader = MDLoader(store, batch_size=job["batch"], backend=backend, online_trial=False,
                          to_sample=codec.encode, collate=list, prefetch=2)
        times = []
        for epoch in range(job["epochs"]):
            loader.set_epoch(epoch)
            for _ in loader:
                time.sleep(job["compute_ms"] / 1e3)  # the trainer, outside MPI
            if epoch:  # the first epoch warms up
                times += loader.epoch_stats.step_fetch_s
        loader.close()
        every = world.comm.gather(times, root=0)
        if world.rank == 0:
            out[backend] = [t for ts in every for t in ts]
    store.close()
    if world.rank == 0:
        Path(job["out"]).write_text(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--ranks-per-host", type=int, default=2)
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--samples", type=int, default=640)
    ap.add_argument("--compute-ms", type=float, default=5.0)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(json.loads(a.worker))
    from mdloader_plugin.devtools.cluster import Cluster

    job = {"samples": a.samples, "batch": a.batch, "epochs": a.epochs,
           "compute_ms": a.compute_ms, "out": "/tmp/mdl-async-progress.json"}
    times = {arm: {b: [] for b in BACKENDS} for arm in ARMS}
    walls = {arm: [] for arm in ARMS}
    with Cluster.up(hosts=a.hosts, ranks_per_host=a.ranks_per_host, rate=a.rate,
                    name="async") as cl:
        for r in range(a.rounds):
            for arm in (list(ARMS) if r % 2 == 0 else list(ARMS)[::-1]):
                t0 = time.perf_counter()
                res = cl.run([sys.executable, "-m", "mpi4py",
                    *module("bench.fetch.async_progress"), "--worker",
                              json.dumps(job)], timeout=600, capture_output=True, text=True,
                             cwd=ROOT, env=ARMS[arm], family="mpich")
                if res.returncode:
                    raise SystemExit(f"{arm}: exit {res.returncode}\n{res.stderr[-3000:]}")
                walls[arm].append(time.perf_counter() - t0)
                for b, ts in json.loads(Path(job["out"]).read_text()).items():
                    times[arm][b] += ts
                print(f"round {r} {arm}: {walls[arm][-1]:.1f} s", flush=True)
    rows = [{"arm": arm, "backend": b, "steps": len(ts),
             "p50_ms": float(np.percentile(ts, 50) * 1e3),
             "p95_ms": float(np.percentile(ts, 95) * 1e3),
             "job_wall_s": float(np.median(walls[arm]))}
            for arm, per in times.items() for b, ts in per.items()]
    for row in rows:
        print(f"{row['arm']:>20} {row['backend']:>10}: p50 {row['p50_ms']:.2f} ms, "
              f"p95 {row['p95_ms']:.2f} ms ({row['steps']} fetches)")
    import os

    OUT.write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "mpi": "mpich wheel",
        "cluster": f"{a.hosts}x{a.ranks_per_host}@{a.rate}", "rounds": a.rounds,
        "epochs": a.epochs, "batch": a.batch, "samples": a.samples,
        "compute_ms": a.compute_ms, "load": os.getloadavg()[0], "rows": rows,
        "record": record(a, family="mpich")}, indent=1) + "\n")


if __name__ == "__main__":
    main()
