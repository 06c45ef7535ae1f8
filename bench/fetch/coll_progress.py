"""Does a progress thread make the collective backend faster across hosts? (issue 15, item 2)

On the emulated cluster (``mdloader cluster``: real Open MPI over rate-limited TCP between
network namespaces) three arms run interleaved in one job, step time to a ready batch
(``choice_worker.py``): the collective backend with ``MDLOADER_COLL_PROGRESS_THREAD=0`` and
``=1``, and the one-sided backend (with its own progress thread, as it always runs across hosts).
Writes ``bench/results/coll_progress.json``; prints median step per arm and the ratio.

    python -m bench.fetch.coll_progress [--shapes 4x1@300mbit,2x3@100mbit] [--rounds 4] [--steps 8]
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

from bench.harness import RESULTS, ROOT, module, record

WORKER = module("bench.estimator.choice_worker")
ARMS = [{"label": "collective", "backend": "collective",
         "env": {"MDLOADER_COLL_PROGRESS_THREAD": "0"}},
        {"label": "collective+thread", "backend": "collective",
         "env": {"MDLOADER_COLL_PROGRESS_THREAD": "1"}},
        {"label": "onesided", "backend": "onesided", "env": {}}]


def parse_shape(text: str) -> tuple[int, int, str]:
    """``HxR@RATE`` -> (hosts, ranks per host, rate)."""
    try:
        shape, rate = text.split("@")
        h, r = (int(x) for x in shape.lower().split("x"))
    except ValueError:
        raise SystemExit(f"bad shape {text!r}: expected HOSTSxRANKS@RATE, e.g. 4x1@300mbit")
    return h, r, rate


def run_worker(cl, job: dict, timeout: float, keep_partial: bool = False) -> list[dict]:
    """The worker's rows. It writes them as it goes, so with `keep_partial` a failed or timed-out
    job still returns the configurations it finished (with a warning), instead of none."""
    out = Path(job["out"])
    try:
        res = cl.run([sys.executable, "-m", "mpi4py", *WORKER, json.dumps(job)],
                     timeout=timeout, text=True, cwd=ROOT, env={"PYTHONUNBUFFERED": "1"},
                     capture_output=True)
        print(res.stdout, end="", flush=True)
        failed = (f"exit {res.returncode}:\n{res.stderr[-2500:]}" if res.returncode else "")
    except subprocess.TimeoutExpired:
        failed = f"no end after {timeout:.0f} s"
    if failed and not (keep_partial and out.exists()):
        raise SystemExit(f"worker failed on {cl.describe()} ({failed})")
    rows = json.loads(out.read_text())
    out.unlink()
    if failed:
        print(f"WARNING: worker failed on {cl.describe()} ({failed.splitlines()[0]}); keeping "
              f"the {len(rows)} configurations it finished", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="4x1@300mbit,2x3@100mbit")
    ap.add_argument("--batches", default="2,8,64")
    ap.add_argument("--dists", default="hydragnn,oc20")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args()
    from mdloader_plugin.devtools.cluster import Cluster

    RESULTS.mkdir(parents=True, exist_ok=True)
    rows, t0 = [], time.perf_counter()
    for spec in a.shapes.split(","):
        h, r, rate = parse_shape(spec)
        with Cluster.up(hosts=h, ranks_per_host=r, rate=rate,
                        name=f"cp{os.getpid() % 10000}") as cl:
            job = {"out": str(RESULTS / f".coll-progress-{os.getpid()}.json"),
                   "dists": a.dists.split(","), "batches": [int(b) for b in a.batches.split(",")],
                   "rounds": a.rounds, "steps": a.steps, "arms": ARMS}
            print(f"== {spec}", flush=True)
            for row in run_worker(cl, job, timeout=1500):
                rows.append({**row, "shape": spec, "rate": rate})
    for row in rows:
        med = {k: float(np.median(v)) for k, v in row["steps_s"].items()}
        row["median_s"] = med
        row["thread_speedup"] = med["collective"] / med["collective+thread"]
        print(f"{row['shape']:>14} {row['dist']:>8} batch {row['batch']:>4}: collective "
              f"{med['collective'] * 1e3:7.2f} ms, +thread {med['collective+thread'] * 1e3:7.2f}"
              f" ms ({row['thread_speedup']:.2f}x), onesided {med['onesided'] * 1e3:7.2f} ms")
    out = RESULTS / "coll_progress.json"
    out.write_text(json.dumps({"rows": rows, "load_avg": os.getloadavg(), "record": record(a),
                               "seconds": round(time.perf_counter() - t0, 1)}, indent=1))
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
