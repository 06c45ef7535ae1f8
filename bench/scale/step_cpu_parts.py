"""CPU of the non-MPI parts of a one-sided step (P = 4, B = 4 plans, rank 0's ids) on an
OC20-like file, in one process without MPI, so that two trees can be compared part by part:
``plan`` (the sampler's plan of a step), ``index`` (``nbytes``, ``offsets``, ``owner_of`` of the
step's ids, warm), ``index_cold`` (the same right after reading ``/proc/self/smaps_rollup``, as
``bench/loaders/compare.py`` does between steps: caches and TLB cold; wall time), ``gather``
(copying the
step's records) and ``collate`` (the column-wise ``Batch``). Run from a tree's root (the tree
before issue 19 works too):

    python -m bench.scale.step_cpu_parts bench/work/oc20-1024.bp 5 OUT.json

Microseconds a step, median (and min) over the rounds; process CPU time except ``index_cold``."""

import json
import os
import sys
import time

import numpy as np

from mdloader_plugin.backends.base import Fetched, exclusive_cumsum, gather_local
from mdloader_plugin.batching.pyg import ColumnCollate, pyg_collate, pyg_sample
from mdloader_plugin.sampling.reference import ReferenceSchedule as GlobalSampler
from mdloader_plugin.store.shard import ShardStore


def main() -> None:
    path, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    st = ShardStore.from_file(None, path)
    smp = GlobalSampler(st.num_samples, 4, 4, shuffle=True, seed=0)
    steps = st.num_samples // 16
    cc = ColumnCollate(pyg_sample, pyg_collate)
    plans = [smp.plan(0, s) for s in range(steps)]
    fets = []
    for p in plans:
        ids = p[0]
        nb, src = st.nbytes[ids], st.offsets[ids]
        dst = exclusive_cumsum(nb)
        buf = np.empty(int(nb.sum()), dtype=np.uint8)
        gather_local(st.buffer, src, nb, buf, dst)
        fets.append((ids, nb, src, dst, Fetched(ids, buf, dst, nb)))

    def t_plan():
        for e in range(2):
            for s in range(steps):
                smp.plan(e, s)

    def t_index():
        for p in plans:
            ids = p[0]
            st.nbytes[ids], st.offsets[ids], st.owner_of(ids)

    def t_gather():
        for _, nb, src, dst, _ in fets:
            gather_local(st.buffer, src, nb, np.empty(int(nb.sum()), dtype=np.uint8), dst)

    def t_collate():
        for *_, f in fets:
            cc(f)

    def index_cold() -> float:
        tot = 0.0
        for p in plans:
            with open("/proc/self/smaps_rollup") as f:
                f.read()
            ids = p[0]
            t = time.perf_counter()
            st.nbytes[ids], st.offsets[ids], st.owner_of(ids)
            tot += time.perf_counter() - t
        return tot / len(plans) * 1e6

    cold = [index_cold() for _ in range(rounds)]
    res = {"index_cold": float(np.median(cold)), "index_cold_min": float(min(cold))}
    for name, fn, n in [("plan", t_plan, 2 * steps), ("index", t_index, steps),
                        ("gather", t_gather, steps), ("collate", t_collate, steps)]:
        fn()
        per = []
        for _ in range(rounds):
            t = time.process_time()
            fn()
            per.append((time.process_time() - t) / n * 1e6)
        res[name], res[name + "_min"] = float(np.median(per)), float(min(per))
    res.update(cwd=os.getcwd(), load=os.getloadavg()[0], steps=steps)
    print(json.dumps(res))
    with open(out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
