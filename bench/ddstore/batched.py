"""MDLoader against DDStore 954ef59's batched reads (``get_batch``), fetch only, every read checked.

The peer: ORNL DDStore at 954ef59 (pyddstore 2.0; built bench-only by ``tools/build_ddstore.sh
954ef59`` into ``build/ddstore-954ef59``). Its ``get_batch`` method 0 is collective (Allgather of
the counts, Allgatherv of the indices, Alltoallv of the rows), method 1 one-sided (libfabric
``fi_read``s posted together, ``FABRIC_IFACE=lo``; ``eth0``, the emulated hosts' link, with
``--cluster``). Graphs are held in fixed-width rows, padded
(``_pad``) or cut (``_rows``): ``bench/ddstore/layouts.py``.

For every data set (the synthetic molecules and OC20-like slabs of ``bench/loaders/compare.py``) and
batch size, one job loads MDLoader's store and builds the four DDStore variants from its records;
every loader serves the SAME steps of the SAME plan (``GlobalSampler``, seed 0: rank ``r`` takes
``plan[r]``): after a warm-up (auto's online trial included) every loader is brought to the same
global step, then ``--rounds`` rounds run ``--steps`` steps each, the loaders in a rotated order
a round (paired: the machine's noise hits them alike). A step: Barrier, fetch, timed on every
rank, MAX over ranks. MDLoader's fetch is the loader's own fetch timer (plan sends, the backend's
exchange, into its receive buffer); DDStore's is the row ids plus ``get_batch`` into a reused
buffer. Between two fetches every loader makes the step's records into a batch, outside its
timer, as a training loop does: MDLoader in its own step, DDStore's rows through the same batch
builder (``Batches``; ``--bare-dds`` leaves DDStore's fetches back to back). The work between
fetches changes the next fetch's time where ranks outnumber cores (4 ranks on 2 cores: the
backend called directly takes ~2x as long with a batch built between its fetches as without,
``bench/ddstore/collective_ab.py``). Every record read is compared byte for byte with the data
set (allgathered once) and the ids with the plan; ``mismatches`` counts both. ``bytes_moved``:
median over steps of the most bytes a rank receives into its output (padding included).

    python -m bench.ddstore.batched [--ranks 2,4] [--batches 4,32,256] [--heldout-ranks 3]
        [--heldout-batches 64] [--cluster 2x2@1gbit] [--rounds 5] [--steps 6]

Writes ``bench/results/ddstore_batched.json`` (``--out``; ``--merge`` keeps rows of other shapes).
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

from bench.harness import RESULTS, ROOT, commit, machine, mpiexec_argv, mpi_env, module, record

DDS_PREFIX = ROOT / "build" / "ddstore-954ef59"

MDL = ("mdl_onesided", "mdl_collective", "mdl_auto")
DDS = ("dds_coll_pad", "dds_coll_rows", "dds_fabric_pad", "dds_fabric_rows")
LOADERS = MDL + DDS


class Checked:
    """The loader's batch builder, wrapped: checks every fetched record (after the fetch timer)."""

    def __init__(self, build, ref):
        self.build, self.ref = build, ref
        self.ids, self.bad, self.nbytes = None, 0, 0

    def __call__(self, fetched, backend):
        self.ids = np.asarray(fetched.ids).copy()
        self.nbytes = int(fetched.nbytes.sum())
        self.bad += self.ref.mismatches(
            self.ids, [fetched.record(i) for i in range(self.ids.size)])
        return self.build(fetched, backend)


class MDLRunner:
    def __init__(self, store, ref, batch: int, name: str):
        from bench.loaders.stepping import MDLStepper
        from mdloader_plugin.loader.loader import MDLoader

        self.name = name
        self.loader = MDLoader(store, batch_size=batch, shuffle=True, seed=0,
                               backend=name[4:], prefetch=0, name=f"bench-{name}")
        self.check = Checked(self.loader._steps.build, ref)
        self.loader._steps.build = self.check
        self.stepper, self.k = MDLStepper(self.loader), 0

    def step(self, expect: np.ndarray):
        self.stepper(self.k)
        self.k += 1
        ok = np.array_equal(self.check.ids, expect)
        return self.loader.epoch_stats.step_fetch_s[-1], self.check.nbytes, int(not ok)

    def warm(self) -> bool:
        return self.stepper.warm()

    def backend(self) -> str:
        return self.loader.decision["backend"]

    def close(self) -> None:
        self.loader.close()


class Batches:
    """What a training loop does with a step's records between two fetches: makes them into a
    batch, here with the loader's own builder (PyG ``Batch``; outside every fetch timer). The
    MDLoader runners build in the loader's step; a DDStore runner given one builds from its rows,
    so both loops do the same work between fetches (``--bare-dds``: DDStore fetches back to
    back, as the runs before 2026-12-07 08:00 UTC did)."""

    class _Keep:  # the rows buffer is DDStore's, reused: the builder gives nothing back
        class buffers:  # noqa: N801 - the attribute the builder calls
            give = staticmethod(lambda buf: None)

    def __init__(self):
        from mdloader_plugin.batching.pyg import pyg_collate, pyg_sample
        from mdloader_plugin.loader.step import BatchBuilder

        self.build = BatchBuilder(pyg_sample, pyg_collate)

    def __call__(self, fetched) -> None:
        self.build(fetched, self._Keep)


class DDSRunner:
    def __init__(self, store, ref, comm, name: str, row_bytes: int, batches=None):
        from bench.ddstore.layouts import DDStoreBatched

        _, kind, layout = name.split("_")
        self.name, self.batches = name, batches
        self.dds = DDStoreBatched(store, comm, ref, 0 if kind == "coll" else 1, layout,
                                  row_bytes)

    def step(self, ids: np.ndarray):
        t, out = self.dds.fetch(ids)
        bad = self.dds.check(ids, out)
        if self.batches is not None:
            self.batches(self.dds.fetched(ids, out))
        return t, self.dds.bytes_moved(ids), bad

    def close(self) -> None:
        self.dds.close()


def row_bytes_for(mean_record: float) -> int:
    """``_rows`` width: the power of two nearest a quarter of the mean record (~4 rows a record,
    at most a row of padding each)."""
    return int(2 ** round(np.log2(max(mean_record / 4, 8))))


def bench_batch(world, store, ref, sampler, loaders, a, row_bytes) -> list[dict]:
    from mpi4py import MPI

    comm, rank = world.comm, world.rank
    spe = sampler.steps_per_epoch
    runners, batches = [], None if a.bare_dds else Batches()
    for n in loaders:
        runners.append(MDLRunner(store, ref, sampler.batch_size, n) if n in MDL
                       else DDSRunner(store, ref, comm, n, row_bytes, batches))
    plan = lambda k: sampler.plan(k // spe, k % spe)[rank]  # noqa: E731
    # warm-up: one step each; MDLoader until auto's online trial is over
    for r in runners:
        k = 0
        while True:
            comm.Barrier()
            r.step(plan(k))
            k += 1
            if not (isinstance(r, MDLRunner) and r.warm() and k < 40):
                break
    k0 = comm.allreduce(max(getattr(r, "k", 1) for r in runners), op=MPI.MAX)
    for r in runners:  # every MDLoader to the same global step
        while isinstance(r, MDLRunner) and r.k < k0:
            comm.Barrier()
            r.step(plan(r.k))
    times = {r.name: [] for r in runners}
    moved = {r.name: [] for r in runners}
    bad = {r.name: 0 for r in runners}
    rounds = []
    for rnd in range(a.rounds):
        order = runners[rnd % len(runners):] + runners[:rnd % len(runners)]
        for r in order:
            t = []
            for s in range(a.steps):
                ids = plan(k0 + rnd * a.steps + s)
                comm.Barrier()
                dt, nb, wrong = r.step(ids)
                t.append(dt)
                moved[r.name].append(nb)
                bad[r.name] += wrong
            tmax = np.empty(len(t))
            comm.Allreduce(np.asarray(t), tmax, op=MPI.MAX)
            times[r.name].append(tmax)
        rounds.append(os.getloadavg()[0])
    rows = []
    for r in runners:
        f = np.concatenate(times[r.name])
        nb = np.empty(len(moved[r.name]), dtype=np.int64)
        comm.Allreduce(np.asarray(moved[r.name], dtype=np.int64), nb, op=MPI.MAX)
        row = {"batch": sampler.batch_size, "loader": r.name,
               "fetch_ms_median": round(float(np.median(f)) * 1e3, 4),
               "fetch_ms_p95": round(float(np.percentile(f, 95)) * 1e3, 4),
               "fetch_ms_p10": round(float(np.percentile(f, 10)) * 1e3, 4),  # uninterrupted
               "bytes_moved": int(np.median(nb)),
               "round_medians_ms": [round(float(np.median(x)) * 1e3, 4) for x in times[r.name]],
               "steps": int(f.size), "first_step": int(k0),
               "mismatches": int(comm.allreduce(bad[r.name], op=MPI.SUM)),
               "records_checked": int(comm.allreduce(len(moved[r.name]), op=MPI.SUM)
                                      * sampler.batch_size)}
        if isinstance(r, MDLRunner):
            row["backend"] = r.backend()
        rows.append(row)
    for r in runners:
        r.close()
    return rows


def worker(a) -> None:
    import torch

    from bench.ddstore.layouts import Reference
    from mdloader_plugin.core.log import get_logger
    from mdloader_plugin.mpi.world import World
    from mdloader_plugin.sampling.reference import ReferenceSchedule as GlobalSampler
    from mdloader_plugin.store.shard import ShardStore
    from bench.loaders.compare import DATASETS, WORK

    torch.set_num_threads(1)
    world = World.detect()
    get_logger(world.rank).setLevel("WARNING")
    rows = []
    for ds in a.datasets.split(","):
        store = ShardStore.from_file(world, str(WORK / f"{ds}-{DATASETS[ds]}.bp"))
        ref = Reference(store, world.comm)
        rb = row_bytes_for(float(ref.nbytes.mean()))
        for b in [int(x) for x in a.batches.split(",")]:
            sampler = GlobalSampler(store.num_samples, world.size, b, shuffle=True, seed=0)
            for row in bench_batch(world, store, ref, sampler, a.loaders.split(","), a, rb):
                rows.append({"dataset": ds, "ranks": world.size, "hosts": world.num_nodes,
                             **row, "row_bytes": rb if row["loader"].endswith("_rows") else None,
                             "widest_record": int(ref.nbytes.max()),
                             "mean_record": float(ref.nbytes.mean())})
                if world.rank == 0:
                    print(f"  {ds} P={world.size} B={b} {row['loader']:16s} fetch "
                          f"{row['fetch_ms_median']:8.3f} ms (p95 {row['fetch_ms_p95']:8.3f}) "
                          f"bad {row['mismatches']}", flush=True)
        store.close()
    if world.rank == 0:
        Path(a.tmp).write_text(json.dumps(rows))
    world.close()


# -- driver ------------------------------------------------------------------------------------
def run_shape(a, ranks: int | None, batches: str, heldout: bool) -> list[dict]:
    """One job (``mpiexec -n ranks``, or the emulated cluster) over every data set."""
    tmp = RESULTS / f".ddstore-batched-{os.getpid()}.json"
    args = [*module("bench.ddstore.batched"), "--worker", "--tmp", str(tmp),
            "--datasets", a.datasets, "--batches", batches, "--loaders", a.loaders,
            "--rounds", str(a.rounds), "--steps", str(a.steps)] + ["--bare-dds"] * a.bare_dds
    pypath = os.pathsep.join([str(DDS_PREFIX), str(ROOT)] + [os.environ.get("PYTHONPATH", "")])
    if a.cluster:
        from bench.loaders.compare import parse_cluster
        from mdloader_plugin.devtools.cluster import Cluster

        hosts, rph, rate = parse_cluster(a.cluster)
        with Cluster.up(hosts=hosts, ranks_per_host=rph, rate=rate, name="ddsb") as cl:
            r = cl.run([sys.executable, "-m", "mpi4py", *args], timeout=3000, cwd=ROOT, env={
                "PYTHONUNBUFFERED": "1", "PYTHONPATH": pypath, "FABRIC_IFACE": "eth0"})
    else:
        r = subprocess.run(mpiexec_argv(ranks, args), env=mpi_env({"PYTHONPATH": pypath}),
                           cwd=ROOT, timeout=3000)
    if r.returncode:
        sys.exit(f"ddstore_batched: the job failed (exit {r.returncode})")
    rows = json.loads(tmp.read_text())
    tmp.unlink()
    for row in rows:
        row["heldout"] = heldout
        row["link_rate"] = parse_rate(a.cluster)
    return rows


def parse_rate(cluster: str | None) -> str | None:
    return cluster.partition("@")[2] or "1gbit" if cluster else None


def mpi_version() -> str:
    code = ("from mpi4py import MPI, __version__ as v; "
            "print(MPI.Get_library_version().split(',')[0].strip(), '(mpi4py', v + ')')")
    return subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2,4", help="ranks on one host (development grid)")
    ap.add_argument("--batches", default="4,32,256", help="development grid")
    ap.add_argument("--heldout-ranks", default="3", help="ranks run over every batch, held out")
    ap.add_argument("--heldout-batches", default="64", help="batches run at --ranks, held out")
    ap.add_argument("--cluster", metavar="HxR[@RATE]", help="2 emulated hosts instead (root)")
    ap.add_argument("--datasets", default="hydragnn,oc20")
    ap.add_argument("--loaders", default=",".join(LOADERS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=6, help="measured steps a loader a round")
    ap.add_argument("--bare-dds", action="store_true",
                    help="DDStore fetches back to back, no batch built between (MDLoader's "
                         "loaders always build one: the comparison is then not like for like)")
    ap.add_argument("--out", default=str(RESULTS / "ddstore_batched.json"))
    ap.add_argument("--merge", action="store_true", help="keep rows of other shapes in --out")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    from bench.loaders.compare import make_data

    make_data(a.datasets.split(","))
    info = {**machine(), "mpi": mpi_version(), "commit": commit(),
            "ddstore": "954ef59 (pyddstore 2.0)", "parameters": {
                k: getattr(a, k) for k in ("ranks", "batches", "heldout_ranks", "heldout_batches",
                                           "cluster", "datasets", "loaders", "rounds", "steps",
                                           "bare_dds")}}
    rows, t0 = [], time.time()
    shapes = ([(None, a.batches, False)] + ([(None, a.heldout_batches, True)]
                                            if a.heldout_batches else []) if a.cluster else
              [(int(p), a.batches, False) for p in a.ranks.split(",")]
              + [(int(p), a.heldout_batches, True) for p in a.ranks.split(",")
                 if a.heldout_batches]
              + [(int(p), f"{a.batches},{a.heldout_batches}".strip(","), True)
                 for p in a.heldout_ranks.split(",") if p])
    for p, b, held in shapes:
        print(f"{a.cluster or f'{p} ranks'}: batches {b}{' (held out)' if held else ''}",
              flush=True)
        rows += run_shape(a, p, b, held)
    out = Path(a.out)
    if a.merge and out.exists():
        keys = {(r["ranks"], r["hosts"], r["batch"]) for r in rows}
        old = json.loads(out.read_text())
        rows = [r for r in old["rows"] if (r["ranks"], r["hosts"], r["batch"]) not in keys] + rows
        info["merged_with"] = old.get("runs", [old.get("machine")])
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    info["wall_s"] = round(time.time() - t0)
    prev = json.loads(out.read_text()).get("runs", []) if a.merge and out.exists() else []
    out.write_text(json.dumps({"date": info["date"], "record": record(a), "runs": prev + [info],
                               "rows": rows}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
