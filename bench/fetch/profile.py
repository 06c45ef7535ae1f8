"""Where a one-sided fetch spends its fixed per-step cost (issue 21, part 4), beside the real
DDStore's path and MPI's bare costs, on the loaders' synthetic data sets.

Under ``mpiexec -n P python -m mpi4py -m bench.fetch.profile``: per data set and batch size,
the median over ``--steps`` steps (max over ranks, ranks synchronised before each step) of

- ``onesided``: ``OneSidedBackend.fetch(plan)`` (what the loaders grid calls ``fetch``);
- its parts as the numpy path runs them, one after the other on the same plans: ``index``
  (nbytes/offsets/owner lookups),
  ``plan`` (owner sort, destination offsets, buffer), ``local`` (memcpy of rank-local records),
  ``get+flush`` (the remote Gets and one ``Flush_all``);
- ``ddstore-real``: the real DDStore's step (``epoch_begin``, a per-sample ``get``, ``epoch_end``)
  when ``pyddstore`` imports;
- MPI's bare costs on the store's window: one ``Get`` of one record + ``Flush_all``
  (``bare_get``), ``Flush_all`` alone (``bare_flush``), a 1-byte Get + flush (``bare_get1``);
- ``local_get``: the rank-local records as ONE indexed Get from the rank's own window + flush,
  the alternative to ``local`` (tried for large steps, slower: not used by the backend);
- ``memcpy_floor``: one core copying the step's bytes (loaders.memcpy_floor).

Writes ``bench/results/fetch_profile.json`` (rank 0); prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from bench.harness import BENCH as HERE, rank_mpi, record


BETWEEN_KIND = ["none"]
BETWEEN = [lambda: None]  # what a step does between two fetches (--between collate: a batch)


def timed(comm, fn, steps):
    from mpi4py import MPI

    out = []
    for k in range(steps):
        BETWEEN[0]()
        comm.Barrier()
        t = time.perf_counter()
        fn(k)
        out.append(time.perf_counter() - t)
    a = np.asarray(out)
    m = np.empty_like(a)
    comm.Allreduce(a, m, op=MPI.MAX)
    return float(np.median(m))


def profile(world, path, batches, steps, out_rows, ds):
    from mpi4py import MPI

    from bench.ddstore import real as ddstore_real
    from bench.loaders.compare import memcpy_floor
    from mdloader_plugin.backends.base import exclusive_cumsum, gather_local
    from mdloader_plugin.backends.onesided import OneSidedBackend
    from mdloader_plugin.sampling.reference import ReferenceSchedule as GlobalSampler
    from mdloader_plugin.store.shard import ShardStore

    comm, rank = world.comm, world.rank
    store = ShardStore.from_file(world, str(path))
    be = OneSidedBackend(store, world)
    if BETWEEN_KIND[0] == "collate":  # as the loaders grid: a batch is collated between fetches
        from mdloader_plugin.records import codec
        from mdloader_plugin.loader.loader import pyg_collate, pyg_sample

        lo = store.local_range[0]
        samples = [codec.decode(store.local_record(lo + i)) for i in range(max(batches))]
        BETWEEN[0] = lambda: pyg_collate([pyg_sample(a) for a in samples])
    for b in batches:
        smp = GlobalSampler(store.num_samples, world.size, b, shuffle=True, seed=0)
        spe = smp.steps_per_epoch
        plans = [smp.plan(k // spe, k % spe) for k in range(steps + 3)]
        row = {"dataset": ds, "ranks": world.size, "batch": b}

        def fetch(k):
            f = be.fetch(plans[k])
            be.buffers.give(f.buf)
        fetch(0); fetch(1)
        row["onesided"] = timed(comm, fetch, steps)

        st = store
        def index(k):
            ids = plans[k][rank]
            st.nbytes[ids], st.offsets[ids], st.owner_of(ids)
        row["index"] = timed(comm, index, steps)

        pre = []
        for k in range(steps):
            ids = plans[k][rank]
            pre.append((ids, st.nbytes[ids], st.offsets[ids], st.owner_of(ids)))

        def plan_part(k):
            ids, nb, src, owners = pre[k]
            order = np.argsort(owners, kind="stable")
            dst = np.empty(ids.size, dtype=np.int64)
            dst[order] = exclusive_cumsum(nb[order])
            be.buffers.give(be.buffers.take(int(nb.sum())))
        row["plan"] = timed(comm, plan_part, steps)

        one = np.empty(int(max(p[1].sum() for p in pre)), np.uint8)  # reused: no page faults
        outs = [one[:int(p[1].sum())] for p in pre]
        dsts = []
        for ids, nb, src, owners in pre:
            order = np.argsort(owners, kind="stable")
            dst = np.empty(ids.size, dtype=np.int64)
            dst[order] = exclusive_cumsum(nb[order])
            dsts.append((order, dst))

        def local(k):
            ids, nb, src, owners = pre[k]
            mine = owners == rank
            if mine.any():
                gather_local(st.buffer, src[mine], nb[mine], outs[k], dsts[k][1][mine])
        row["local"] = timed(comm, local, steps)

        def remote(k):
            ids, nb, src, owners = pre[k]
            order, dst = dsts[k]
            if not (owners == rank).all():
                be._get_remote(outs[k], owners, order, src, nb, dst)
        row["get+flush"] = timed(comm, remote, steps)

        def local_get(k):  # the local records as one indexed Get from the own window + flush
            ids, nb, src, owners = pre[k]
            mine = np.flatnonzero(owners == rank)
            if mine.size:
                types = []
                be._get_owner(outs[k], rank, int(dsts[k][1][mine].min()), nb[mine].tolist(),
                              src[mine].tolist(), types)
                be._flush(types)
        row["local_get"] = timed(comm, local_get, steps)
        row["step_bytes"] = int(max(comm.allgather(int(max(p[1].sum() for p in pre)))))
        row["step_bytes_median"] = int(np.median([p[1].sum() for p in pre]))
        row["memcpy_floor"] = memcpy_floor(row["step_bytes_median"])

        other = (rank + 1) % world.size
        lo = int(st.block_starts[other])
        o, n = int(st.offsets[lo]), int(st.nbytes[lo])
        buf = np.empty(n, np.uint8)
        win = be.win

        def bare_get(k):
            win.Get([buf, MPI.BYTE], other, target=(o, n, MPI.BYTE))
            win.Flush_all()
        row["bare_get"] = timed(comm, bare_get, steps)
        row["bare_get1"] = timed(comm, lambda k: (win.Get([buf[:1], MPI.BYTE], other,
                                                          target=(o, 1, MPI.BYTE)),
                                                  win.Flush_all()), steps)
        row["bare_flush"] = timed(comm, lambda k: win.Flush_all(), steps)

        if ddstore_real.available():
            class _Smp:
                batch_size = b
                steps_per_epoch = spe
                def plan(self, e, s):
                    return smp.plan(e, s)
            dd = ddstore_real.RealDDStore(smp, store)

            def ddfetch(k):
                ids = plans[k][rank].tolist()
                dd.dds.epoch_begin()
                [dd.get(i) for i in ids]
                dd.dds.epoch_end()
            ddfetch(0)
            row["ddstore-real"] = timed(comm, ddfetch, steps)
            dd.close()
        out_rows.append(row)
        if rank == 0:
            print(" ".join(f"{k}={v * 1e3:.3f}ms" if isinstance(v, float) else f"{k}={v}"
                           for k, v in row.items()), flush=True)
    be.close()
    store.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default="hydragnn,oc20")
    ap.add_argument("--batches", default="4,32")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--between", default="none", choices=["none", "collate"],
                    help="collate a batch before each timed step (caches as cold as in a loader)")
    ap.add_argument("--small-step", type=int, help="onesided.SMALL_STEP for this run")
    ap.add_argument("--out", default=str(HERE / "results" / "fetch_profile.json"))
    a = ap.parse_args()
    from bench.loaders.compare import DATASETS, WORK
    from mdloader_plugin.core.log import get_logger
    from mdloader_plugin.mpi.world import World

    BETWEEN_KIND[0] = a.between
    if a.small_step is not None:
        from mdloader_plugin.backends import onesided

        onesided.SMALL_STEP = a.small_step
    world = World.detect()
    get_logger(world.rank).setLevel("WARNING")
    rows = []
    for ds in a.datasets.split(","):
        profile(world, WORK / f"{ds}-{DATASETS[ds]}.bp", [int(x) for x in a.batches.split(",")],
                a.steps, rows, ds)
    if world.rank == 0:
        Path(a.out).write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M %Z"),
                                           "record": record(a, mpi=rank_mpi()),
                                           "loadavg": os.getloadavg(), "between": a.between,
                                           "small_step": a.small_step,
                                           "rows": rows}, indent=1))
    world.close()


if __name__ == "__main__":
    main()
