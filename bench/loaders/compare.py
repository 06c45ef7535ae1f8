"""MDLoader against the loaders users would otherwise pick, side by side in one run (make bench).

For every rank count one ``mpiexec`` job loads each synthetic data set (HydraGNN-like molecules,
OC20-like slabs) and, for every batch size, drives every loader over the SAME step plans (same
sampler, same seed): MDLoader ``collective``, ``onesided`` and ``auto``; the DDStore-style
per-sample lock/Get/unlock loader; ORNL's real DDStore (``pyddstore``, MPI and
libfabric methods, graphs stored as HydraGNN's ``DistDataset`` stores them; rows skipped with a
note when ``tools/build_ddstore.sh`` has not built it); HydraGNN's file-per-sample reads; full
preload; a PyG DataLoader over the rank's own block (see ``bench/loaders/baselines.py``). A step is
timed
from "give me the next batch" to a collated ``Batch`` on every rank (prefetch off, so the number is
the work, not hidden behind a model), synchronised before each step and reduced with MAX over ranks
(the slowest rank sets the pace of a data-parallel step). ``fetch`` is the part that moves the
bytes.

Reported per configuration: step and fetch time (median, p95), samples/s, per-rank peak RSS
(``VmHWM``, reset before each loader) and peak PSS above the process baseline (RSS counts every
shared-memory window page a rank has read, PSS splits them among the ranks that map them; the
memory target is judged on PSS), the bytes a rank receives per step and the physical floor: the
time one core needs to memcpy those bytes (measured by the driver, out of cache).

Also checks that every plan-driven loader served the same graphs at every step (node counts).

    python -m bench.loaders.compare [--full] [--ranks 2,4] [--batches 4,32,256] [--steps N]
    [--repeats R]
    python -m bench.loaders.compare --cluster 2x2@1gbit     # store-based loaders across emulated
    hosts

Writes ``bench/results/loaders.json`` and ``bench/loaders_<dataset>.png``,
``bench/loaders_memory.png``. Data sets are generated once into ``bench/work/`` (git-ignored).
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

from bench.harness import RESULTS, ROOT, WORK, machine, module, record  # noqa: F401
from bench.harness import mpiexec as _mpiexec
from bench.loaders import stepping
from bench.loaders.stepping import (MDLStepper, PlanStepper, merge, pss, reset_peak,  # noqa: F401
                                    run_steps, summarise)

BENCH = RESULTS.parent
MODULE = "bench.loaders.compare"


def mpiexec(n: int, args: list[str], timeout: float) -> None:
    """``mpiexec -n N python -m mpi4py ARGS`` with the bench's MPI environment; output streams
    through (progress lines), a failure exits with the job's code."""
    _mpiexec(n, args, timeout)


MDL_BACKENDS = ("collective", "onesided", "auto")
ON_STORE = ("ddstore", "ddstore-real", "ddstore-real-fabric")  # built on the loaded store
FROM_FILE = ("file", "preload", "pyg-local")  # need no store (run after it is freed)
LOADERS = MDL_BACKENDS + ON_STORE + FROM_FILE
SAME_PLAN = ("collective", "onesided", "auto", "ddstore", "ddstore-real", "ddstore-real-fabric",
             "file", "preload")
DATASETS = {"hydragnn": 4096, "oc20": 1024}   # graphs per synthetic set


# -- worker (under mpiexec) ---------------------------------------------------------------------
def worker(datasets: list[str], batches: list[int], steps: int, budget: float, repeats: int,
           loaders: list[str], out: str, profile: str | None = None) -> None:
    import torch

    from mdloader_plugin.core.log import get_logger
    from mdloader_plugin.mpi.world import World

    torch.set_num_threads(1)
    world = World.detect()
    get_logger(world.rank).setLevel("WARNING")
    _warm_imports()
    base = pss()
    rows = []
    for ds in datasets:
        rows += bench_dataset(world, ds, WORK / f"{ds}-{DATASETS[ds]}.bp", batches, steps,
                              budget, base, repeats, loaders, profile)
    if world.rank == 0:
        Path(out).write_text(json.dumps(rows))
    world.close()


def _warm_imports() -> None:
    """Load every module and lazy path a loader touches, so the baseline PSS includes them."""
    import numpy as np
    import torch_geometric.loader  # noqa: F401

    from bench.loaders import baselines  # noqa: F401
    from mdloader_plugin.loader.loader import pyg_collate, pyg_sample
    from mdloader_plugin.sources import adios  # noqa: F401

    pyg_collate([pyg_sample({"x": np.zeros((2, 3), np.float32),
                             "edge_index": np.zeros((2, 1), np.int64)})] * 2)


def bench_dataset(world, ds: str, path: Path, batches, steps, budget, base, repeats,
                  loaders, profile=None) -> list[dict]:
    """All loaders over one data set. Store-based loaders run `repeats` interleaved rounds (the
    machine's noise hits them alike); file-based ones run once, after the store is freed."""
    from mdloader_plugin.sampling.reference import ReferenceSchedule as GlobalSampler
    from mdloader_plugin.store.shard import ShardStore

    store = ShardStore.from_file(world, str(path))
    info = {"dataset": ds, "ranks": world.size, "hosts": world.num_nodes,
            "num_samples": store.num_samples, "dataset_bytes": int(store.nbytes.sum()),
            "mean_record_bytes": float(store.nbytes.mean())}
    samplers = {b: GlobalSampler(store.num_samples, world.size, b, shuffle=True, seed=0)
                for b in batches}
    raw: dict[tuple, list] = {}
    for b in batches:
        for _ in range(repeats):
            for name in [n for n in MDL_BACKENDS + ON_STORE if n in loaders]:
                raw.setdefault((b, name), []).append(
                    bench_one(world, name, samplers[b], store, path, steps, budget, base,
                              profile))
    nbytes = store.nbytes.copy()
    store.close()
    for b in batches:
        for name in [n for n in FROM_FILE if n in loaders]:
            raw[(b, name)] = [bench_one(world, name, samplers[b], None, path, steps, budget,
                                        base)]
    refs = {b: raw[(b, "collective")][0]["nodes"] for b in batches if (b, "collective") in raw}
    rows = []
    for (b, name), runs in raw.items():
        ref = refs.get(b)
        same = _same_batches(world, [r.pop("nodes") for r in runs], ref, name)
        row = {**info, "batch": b, "loader": name, **merge(runs), "same_batches": same,
               "step_bytes_max": _step_bytes(world, samplers[b], nbytes)}
        rows.append(row)
        if world.rank == 0:
            print(f"  {ds} P={world.size} B={b} {name:10s} step "
                  f"{row['step_median_s'] * 1e3:8.2f} ms (p95 {row['step_p95_s'] * 1e3:8.2f}) "
                  f"pss {row['data_pss_mib']:7.1f} MiB", flush=True)
    return rows


def bench_one(world, name, sampler, store, path, steps, budget, base, profile=None) -> dict:
    import gc

    from bench.loaders.baselines import FACTORIES
    from mdloader_plugin.loader.loader import MDLoader

    gc.collect()
    reset_peak()
    world.comm.Barrier()
    if name in MDL_BACKENDS:
        loader = MDLoader(store, batch_size=sampler.batch_size, shuffle=True, seed=0,
                          backend=name, prefetch=0, name=f"bench-{name}", profile=profile)
        stepper = MDLStepper(loader)
    else:
        loader = FACTORIES[name](sampler, store, str(path), world)
        stepper = PlanStepper(loader, sampler)
    res = run_steps(world, stepper, steps, budget)
    out = summarise(world, res, base)
    if name in MDL_BACKENDS:
        out["chosen_backend"] = loader.decision["backend"]
        out["backends_used"] = loader.epoch_stats.backend
    loader.close()
    return out


def _same_batches(world, runs: list[dict], ref: dict | None, name: str):
    """Collective: did this loader serve the same graphs as MDLoader collective at every step
    both ran (compared by node count)? ``None`` for loaders with their own order."""
    if name not in SAME_PLAN or ref is None:
        return None
    ok = all(nodes[k] == ref[k] for nodes in runs for k in nodes.keys() & ref.keys())
    return bool(world.comm.allreduce(int(ok), op=_min()))


def _min():
    from mpi4py import MPI

    return MPI.MIN


def _step_bytes(world, sampler, nbytes: np.ndarray) -> int:
    """Median over the epoch's steps of the most bytes any rank receives in a step."""
    per = [int(nbytes[sampler.plan(0, s)].sum(axis=1).max())
           for s in range(sampler.steps_per_epoch)]
    return int(np.median(per))


# -- driver ------------------------------------------------------------------------------------
def make_data(datasets: list[str]) -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    for ds in datasets:
        path = WORK / f"{ds}-{DATASETS[ds]}.bp"
        if path.exists():
            continue
        print(f"generating {path.relative_to(ROOT)} ...", flush=True)
        subprocess.run([sys.executable, "-m", "mdloader_plugin", "synth", "--kind", ds,
                        "--num-graphs", str(DATASETS[ds]), "--out", str(path), "--quiet"],
                       check=True, cwd=ROOT)


def memcpy_floor(nbytes: int, repeats: int = 15) -> float:
    """Median time for one core to copy `nbytes` from a 256 MiB buffer (out of cache)."""
    src = np.ones(256 * 2**20, dtype=np.uint8)
    dst = np.empty(nbytes, dtype=np.uint8)
    rng = np.random.default_rng(0)
    times = []
    for _ in range(repeats):
        o = int(rng.integers(0, src.size - nbytes))
        t = time.perf_counter()
        np.copyto(dst, src[o:o + nbytes])
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def add_floor(rows: list[dict]) -> None:
    floors: dict[int, float] = {}
    for r in rows:
        n = r["step_bytes_max"]
        if n not in floors:
            floors[n] = memcpy_floor(n)
        r["floor_s"] = floors[n]
        r["step_over_floor"] = r["step_median_s"] / floors[n]
        f = r["fetch_median_s"]
        r["fetch_over_floor"] = None if f is None else f / floors[n]
        r["samples_per_s"] = r["batch"] * r["ranks"] / r["step_median_s"]


def run_grid(a, datasets, batches, steps, budget, repeats, loaders) -> list[dict]:
    """One mpiexec a rank count (or one job on the emulated cluster with ``--cluster``)."""
    args = ["--worker", *(["--graphs", str(a.graphs)] if a.graphs else []),
            "--datasets", ",".join(datasets), "--batches", ",".join(map(str, batches)),
            "--steps", str(steps), "--budget", str(budget), "--repeats", str(repeats),
            "--loaders", ",".join(loaders), *(["--profile", a.profile] if a.profile else []),
            "--pss-every", str(a.pss_every), *(["--onesided-numpy"] if a.onesided_numpy else [])]
    rows = []
    if a.cluster:
        from mdloader_plugin.devtools.cluster import Cluster

        hosts, rph, rate = parse_cluster(a.cluster)
        tmp = RESULTS / ".loaders-cluster.json"
        print(f"emulated cluster: {hosts} hosts x {rph} ranks, links {rate}", flush=True)
        with Cluster.up(hosts=hosts, ranks_per_host=rph, rate=rate, name="bench") as cl:
            r = cl.run([sys.executable, "-m", "mpi4py", *module(MODULE), *args, "--tmp", str(tmp)],
                       timeout=1800, env={"PYTHONUNBUFFERED": "1"}, cwd=ROOT)
        if r.returncode:
            sys.exit(f"bench: loaders on the emulated cluster failed (exit {r.returncode})")
        rows = json.loads(tmp.read_text())
        tmp.unlink()
        for row in rows:
            row["link_rate"] = rate
        return rows
    for p in a.ranks:
        tmp = RESULTS / f".loaders-{p}.json"
        t0 = time.perf_counter()
        print(f"{p} ranks: {len(datasets)} data sets x {len(batches)} batch sizes x "
              f"{len(loaders)} loaders ({repeats} rounds of the store-based ones)", flush=True)
        for job, keep in _jobs(loaders):
            mpiexec(p, [*module(MODULE), *_with_loaders(args, job), "--tmp", str(tmp)],
                    timeout=1800)
            rows += [r for r in json.loads(tmp.read_text()) if r["loader"] in keep]
            tmp.unlink()
        print(f"  {p} ranks done in {time.perf_counter() - t0:.0f} s", flush=True)
    return rows


ISOLATED = ("ddstore-real-fabric",)  # libfabric keeps ~165 MiB a rank mapped after free()


def _jobs(loaders: list[str]) -> list[tuple[list[str], set]]:
    """(loaders to run, rows to keep) per mpiexec job: a loader that leaks memory (ISOLATED) runs
    in a job of its own, with ``collective`` beside it for the same-batches check, so the memory
    columns of the others stay true."""
    main = [n for n in loaders if n not in ISOLATED]
    jobs = [(main, set(main))] if main else []
    for n in [n for n in loaders if n in ISOLATED]:
        jobs.append((["collective", n], {n}))
    return jobs


def _with_loaders(args: list[str], loaders: list[str]) -> list[str]:
    i = args.index("--loaders")
    return [*args[:i + 1], ",".join(loaders), *args[i + 2:]]


def parse_cluster(text: str) -> tuple[int, int, str]:
    """``HxR[@RATE]`` -> (hosts, ranks per host, rate), e.g. ``2x2@1gbit``."""
    shape, _, rate = text.partition("@")
    h, _, r = shape.partition("x")
    return int(h), int(r), rate or "1gbit"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true",
                    help="ranks 2,4,8 x batch 4,32,256, 8 steps x 3 rounds")
    ap.add_argument("--ranks", help="comma list (default 2,4; --full 2,4,8)")
    ap.add_argument("--batches", help="comma list (default 4,32,256)")
    ap.add_argument("--datasets", default="hydragnn,oc20")
    ap.add_argument("--loaders", default=",".join(LOADERS), help="comma list of " +
                    ",".join(LOADERS))
    ap.add_argument("--steps", type=int, help="measured steps a round (default 4; --full 8)")
    ap.add_argument("--repeats", type=int,
                    help="interleaved rounds of the store-based loaders (default 2; --full 3)")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds a loader may take per config before it stops (at >= 1 "
                         "measured step)")
    ap.add_argument("--cluster", metavar="HxR[@RATE]",
                    help="run on the emulated cluster (e.g. 2x2@1gbit; needs root): store-based "
                         "loaders only, writes loaders_cluster.json")
    ap.add_argument("--graphs", type=int, help="graphs in every synthetic set (default: "
                    + ", ".join(f"{k} {v}" for k, v in DATASETS.items()) + ")")
    ap.add_argument("--profile", help="machine profile for auto (name or JSON path; default "
                    "local), e.g. bench/results/profile-cluster-200mbit.json with --cluster")
    ap.add_argument("--pss-every", type=int, default=stepping.PSS_EVERY,
                    help="sample PSS after every N-th step; the step after a sample is not timed "
                         "(1: after every step, all timed: the harness before 2026-12-04)")
    ap.add_argument("--onesided-numpy", action="store_true",
                    help="one-sided steps of every size on the numpy path (MDLoader before the "
                         "small-step path of 2026-12-04: the 'before' of bench/results)")
    ap.add_argument("--out")
    ap.add_argument("--no-figures", action="store_true", help="JSON only")
    ap.add_argument("--merge", action="store_true",
                    help="keep the rows of other rank counts already in the output file")
    ap.add_argument("--replot", action="store_true",
                    help="only redraw the figures from bench/results/loaders.json")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    a = ap.parse_args()
    stepping.PSS_EVERY = max(1, a.pss_every)
    if a.onesided_numpy:
        from mdloader_plugin.backends import onesided

        onesided.SMALL_STEP = -1
    datasets = a.datasets.split(",")
    batches = [int(x) for x in (a.batches or "4,32,256").split(",")]
    steps = a.steps or (8 if a.full else 4)
    repeats = a.repeats or (3 if a.full else 2)
    budget = a.budget or (8.0 if a.full else 2.0)
    loaders = a.loaders.split(",")
    if not a.worker and any(n.startswith("ddstore-real") for n in loaders):
        from bench.ddstore import real as ddstore_real

        if not ddstore_real.available():
            print("note: pyddstore is not importable (run tools/build_ddstore.sh): real-DDStore "
                  "rows skipped", flush=True)
            loaders = [n for n in loaders if not n.startswith("ddstore-real")]
    if a.cluster and a.loaders == ",".join(LOADERS):  # libfabric's FABRIC_IFACE=lo is one host
        loaders = [n for n in MDL_BACKENDS + ON_STORE if n not in ISOLATED]
    if a.replot:
        from bench.loaders import plots as bench_plots

        print(bench_plots.loader_figures(json.loads((RESULTS / "loaders.json").read_text()),
                                         BENCH))
        return
    if a.graphs:
        DATASETS.update({k: a.graphs for k in DATASETS})
    if a.worker:
        return worker(datasets, batches, steps, budget, repeats, loaders, a.tmp, a.profile)
    a.ranks = [int(x) for x in (a.ranks or ("2,4,8" if a.full else "2,4")).split(",")]
    out = Path(a.out or RESULTS / ("loaders_cluster.json" if a.cluster else "loaders.json"))
    RESULTS.mkdir(parents=True, exist_ok=True)
    make_data(datasets)
    info = machine()
    rows = run_grid(a, datasets, batches, steps, budget, repeats, loaders)
    add_floor(rows)
    if a.merge and out.exists():
        done = {(r["dataset"], r["ranks"]) for r in rows}
        old = json.loads(out.read_text())
        rows = [r for r in old["rows"] if (r["dataset"], r["ranks"]) not in done] + rows
        info["merged_with"] = {**old["machine"], "steps": old.get("steps"),
                               "repeats": old.get("repeats"),
                               "ranks": sorted({r["ranks"] for r in old["rows"]
                                                if (r["dataset"], r["ranks"]) not in done})}
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    result = {"record": record(a), "machine": info, "full": a.full, "steps": steps,
        "repeats": repeats,
              "pss_every": a.pss_every, "onesided_numpy": a.onesided_numpy,
              "budget_s": budget, "cluster": a.cluster, "profile": a.profile or "local",
              "rows": rows}
    out.write_text(json.dumps(result, indent=1))
    if a.cluster or a.no_figures:
        print(f"wrote {out}")
        return
    from bench.loaders import plots as bench_plots

    figs = bench_plots.loader_figures(result, BENCH)
    print(f"wrote {out}, " + ", ".join(str(f) for f in figs))


if __name__ == "__main__":
    main()
