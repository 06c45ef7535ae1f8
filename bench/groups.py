"""Replica groups on the emulated cluster: every group size x backend, and auto, step by step.

For each link rate and layout (``H`` hosts x ``R`` ranks, network namespaces, real Open MPI over
TCP, ``tc tbf`` rate limit: ``mdloader cluster``), one MPI job (``--worker``) loads the data set
with every valid group size ``W`` (``ShardStore.from_file(..., group_size=W)``), serves ``steps``
batches with each backend through a real :class:`MDLoader` (no prefetch, so the trainer's thread
does every fetch and a step's time is its own) and records, per (W, backend): the median over
steps of the slowest rank's fetch and whole step (fetch + batch), the bytes a step that crossed a
host (summed over ranks, counted in the backends) and the store's memory a rank. Then ``auto``
runs as users run it: ``open_store(group_size="auto")`` (budget: half the node's free memory
over its ranks) and ``backend="auto"`` (model + online check), and its (backend, W) and step are
set against the fastest measured row. Auto's profile is the one ``bench/estimator_cluster.py``
calibrated across the emulated hosts at that rate (``results/profile-cluster-RATE.json``) where
there is one, as a user would calibrate first; else ``local`` (one node: blind to the network,
so node-local groups are preferred).

Epochs are exactly ``steps`` long (``N = P * B * steps``), so no iteration is abandoned.
The machine is shared (2 cores, several users): figures are contaminated by others' load.

    python bench/groups.py [--rates 200mbit] [--shapes 2x2] [--kinds oc20] [--batches 32]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def worker(path: str, batch: int, steps: int, profile: str | None) -> None:
    from mpi4py import MPI

    from mdloader_plugin import budget as mem
    from mdloader_plugin import groups
    from mdloader_plugin.loader import MDLoader
    from mdloader_plugin.placement import open_store
    from mdloader_plugin.store import ShardStore
    from mdloader_plugin.world import World, abort_on_error

    world = World.detect()
    rows = []
    with abort_on_error(world.comm):
        for w in groups.valid_sizes(world.node_of):
            store = ShardStore.from_file(world, path, group_size=w)
            for backend in ("onesided", "collective"):
                rows.append(_measure(world, store, backend, batch, steps, w, MDLoader, MPI, mem))
            store.close()
        store = open_store(world, path, group_size="auto", batch_size=batch, profile=profile)
        row = _measure(world, store, "auto", batch, steps, store.group.size, MDLoader, MPI, mem,
                       profile)
        rows.append(row)
        store.close()
    if world.rank == 0:
        print("ROWS " + json.dumps(rows), flush=True)


def _measure(world, store, backend, batch, steps, w, MDLoader, MPI, mem, profile=None) -> dict:
    loader = MDLoader(store, batch_size=batch, backend=backend, prefetch=0, collate=len,
                      name=f"W{w}-{backend}", profile=profile)
    step_s = []
    it = iter(loader)
    for _ in range(len(loader)):
        t0 = time.perf_counter()
        next(it)
        step_s.append(time.perf_counter() - t0)
    fetch = np.array(loader.epoch_stats.step_fetch_s)
    fetch = _max(world, fetch, MPI)
    step = _max(world, np.array(step_s), MPI)
    traffic = loader.traffic()
    crossed = world.comm.allreduce(traffic["off_node"])
    chosen = loader.backend_name
    loader.close()
    memory = world.comm.allreduce(store.buffer.nbytes + mem.index_bytes(store.num_samples),
                                  op=MPI.MAX)
    return {"group_size": w, "backend": backend, "chosen": chosen, "steps": int(fetch.size),
            "fetch_median_s": float(np.median(fetch)), "step_median_s": float(np.median(step)),
            "crossed_bytes_per_step": crossed / max(1, fetch.size), "memory_per_rank": memory}


def _max(world, arr, MPI):
    out = np.empty_like(arr)
    world.comm.Allreduce(arr, out, op=MPI.MAX)
    return out


def drive(args) -> None:
    from mdloader_plugin.cluster import Cluster

    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {"note": "Emulated cluster on a shared 2-core machine: contaminated by others' load",
           "runs": []}
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-groups-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    for shape in args.shapes.split(","):
        hosts, rph = (int(x) for x in shape.split("x"))
        p = hosts * rph
        for rate in args.rates.split(","):
            prof = RESULTS / f"profile-cluster-{rate}.json"
            prof = str(prof) if prof.exists() else "local"
            with Cluster.up(hosts=hosts, ranks_per_host=rph, rate=rate,
                            name=f"bg{os.getpid() % 10000:04d}") as cl:
                for kind in args.kinds.split(","):
                    for batch in (int(b) for b in args.batches.split(",")):
                        data = work / f"{kind}-{p * batch * args.steps}.bp"
                        if not data.exists():
                            subprocess.run([sys.executable, "-m", "mdloader_plugin", "synth",
                                            "--kind", kind, "--num-graphs",
                                            str(p * batch * args.steps), "--out", str(data),
                                            "--quiet"], check=True, timeout=1800)
                        t0 = time.perf_counter()
                        res = cl.run([sys.executable, "-m", "mpi4py", __file__, "--worker",
                                      str(data), str(batch), str(args.steps), prof],
                                     timeout=1800,
                                     capture_output=True, text=True, cwd=ROOT,
                                     env={"PYTHONUNBUFFERED": "1"})
                        if res.returncode:
                            raise SystemExit(f"bench/groups: {shape}@{rate} {kind} B={batch} "
                                             f"failed:\n{res.stderr[-2000:]}")
                        rows = json.loads(next(ln[5:] for ln in res.stdout.splitlines()
                                               if ln.startswith("ROWS ")))
                        run = {"shape": shape, "rate": rate, "kind": kind, "batch": batch,
                               "profile": Path(prof).name, "rows": rows,
                               "wall_s": time.perf_counter() - t0}
                        run["table"] = table(run)  # bench/report.py puts it in RESULTS.md
                        out["runs"].append(run)
                        print(table(run), flush=True)
    (RESULTS / "groups.json").write_text(json.dumps(out, indent=1))
    print(f"wrote {RESULTS / 'groups.json'}")


def table(run: dict) -> str:
    rows = run["rows"]
    fixed = [r for r in rows if r["backend"] != "auto"]
    best = min(fixed, key=lambda r: r["step_median_s"])
    full = max(r["group_size"] for r in fixed)
    at_p = min((r for r in fixed if r["group_size"] == full), key=lambda r: r["step_median_s"])
    lines = [f"### {run['shape']} @ {run['rate']}, {run['kind']}, batch {run['batch']} "
             f"(auto's profile: {run.get('profile', 'local')})", "",
             "| W | backend | fetch ms (median, slowest rank) | step ms | MB across hosts a step "
             "| memory a rank MiB |", "|---|---|---|---|---|---|"]
    for r in rows:
        name = r["backend"] if r["backend"] != "auto" else f"auto -> {r['chosen']}"
        lines.append(f"| {r['group_size']} | {name} | {r['fetch_median_s'] * 1e3:.2f} | "
                     f"{r['step_median_s'] * 1e3:.2f} | {r['crossed_bytes_per_step'] / 1e6:.2f} "
                     f"| {r['memory_per_rank'] / 2**20:.1f} |")
    auto = rows[-1]
    lines += ["", f"fastest fixed: W={best['group_size']} {best['backend']}; its step is "
              f"{at_p['step_median_s'] / best['step_median_s']:.1f}x faster than W={full} "
              f"({at_p['backend']}); auto chose W={auto['group_size']} {auto['chosen']} "
              f"({auto['step_median_s'] / best['step_median_s']:.2f}x the fastest step)"]
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="200mbit")
    ap.add_argument("--shapes", default="2x2")
    ap.add_argument("--kinds", default="oc20")
    ap.add_argument("--batches", default="32")
    ap.add_argument("--steps", type=int, default=8)
    drive(ap.parse_args())


if __name__ == "__main__":
    main()
