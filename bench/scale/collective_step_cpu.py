"""CPU cost of the store-side work of one collective step (P = 4, B = 4), no MPI: what the
collective backend's ``_fetch`` and ``_pack`` do on a rank besides ``Alltoallv`` (sizes, owners,
offsets of the plan's ids, grouping and gathering the records it sends). Run it from a tree's
root to compare trees (the tree before issue 19 has a plain-array index):

    python -m bench.scale.collective_step_cpu --graphs 4096 --out X.json

Prints and writes microseconds of process CPU time a step (median of rounds)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

import numpy as np

from mdloader_plugin.backends.base import exclusive_cumsum, gather_local
from mdloader_plugin.store.shard import ShardStore


def step(st, plan, rank, size):
    ids = plan[rank]
    nb = st.nbytes[ids]
    owners = st.owner_of(ids)
    order = np.argsort(owners, kind="stable")
    dst = np.empty(ids.size, dtype=np.int64)
    dst[order] = exclusive_cumsum(nb[order])
    out = np.empty(int(nb.sum()), dtype=np.uint8)
    np.bincount(owners, weights=nb, minlength=size).astype(np.int64)
    lo, hi = st.local_range
    flat = plan.reshape(-1)
    mask = (flat >= lo) & (flat < hi)
    wanted = flat[mask]
    dest = np.repeat(np.arange(plan.shape[0]), plan.shape[1])[mask]
    nbw = st.nbytes[wanted]
    sendbuf = np.empty(int(nbw.sum()), dtype=np.uint8)
    gather_local(st.buffer, st.offsets[wanted], nbw, sendbuf, exclusive_cumsum(nbw))
    np.bincount(dest, weights=nbw, minlength=size).astype(np.int64)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", type=int, default=4096)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    sizes = rng.integers(1500, 4000, size=a.graphs)
    st = ShardStore.from_records(None, sizes, lambda buf, offs: None, a.graphs)
    plans = [rng.integers(0, a.graphs, size=(a.ranks, a.batch)) for _ in range(a.steps)]
    per = []
    for _ in range(a.rounds):
        t = time.process_time()
        for p in plans:
            step(st, p, 0, a.ranks)
        per.append((time.process_time() - t) / a.steps * 1e6)
    tree = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip() or os.getcwd()
    res = {"tree": tree, "cwd": os.getcwd(), "graphs": a.graphs, "ranks": a.ranks,
           "batch": a.batch, "us_per_step_rounds": per, "us_per_step": float(np.median(per)),
           "index": type(getattr(st, "index", None)).__name__, "loadavg": os.getloadavg()}
    print(json.dumps(res))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f)


if __name__ == "__main__":
    main()
