"""Per-step fetch with 3 data sets against one file of the same total size (issue 17's target:
within 10%).

One ``mpiexec`` job: molecule files of 1,200 + 600 + 200 graphs (one store, proportional
sampling) and one file of the same 2,000 graphs (one store). For each backend the two stores are
driven in interleaved rounds over the same number of steps (batch 32 a rank, prefetch off, same
seed); a step's fetch is timed from the plan to this rank's records, after a barrier, reduced with
MAX over ranks. The ratio multi / single of the medians is the figure (the id tag adds 1 int64 and
a header entry to every record).

    mpiexec -n 4 python -m mpi4py -m bench.fetch.multi [--steps 40] [--rounds 3]

Writes ``bench/results/multi.json``; data go to ``bench/work/multi/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bench.harness import BENCH as HERE, rank_mpi, record
SIZES = (1200, 600, 200)


def _data(world) -> tuple[list[str], str]:
    from mdloader_plugin.sources import synth
    from mdloader_plugin.sources.adios import write_graphs

    work = HERE / "work" / "multi"
    files = [str(work / f"part{i}.bp") for i in range(len(SIZES))]
    single = str(work / "single.bp")
    if world.rank == 0 and not Path(single).exists():
        work.mkdir(parents=True, exist_ok=True)
        graphs = list(synth.generate("hydragnn", 1, 0, sum(SIZES)))
        start = 0
        for i, (path, n) in enumerate(zip(files, SIZES)):
            write_graphs(path, {"trainset": graphs[start:start + n]},
                         attributes={"dataset_name": f"part{i}"})
            start += n
        write_graphs(single, {"trainset": graphs})
    world.comm.Barrier()
    return files, single


def _fetch_times(loader, backend: str, steps: int, comm) -> list[float]:
    from mdloader_plugin.sampling.reference import world_step

    be = loader._backends[backend]
    out = []
    for step in range(steps):
        plan = world_step(loader.schedule, 0, step)
        comm.Barrier()
        t0 = time.perf_counter()
        fetched = be.fetch(plan)
        dt = time.perf_counter() - t0
        be.buffers.give(fetched.buf)
        out.append(comm.allreduce(dt, op=_max()))
    return out


def _max():
    from mpi4py import MPI

    return MPI.MAX


def main() -> None:
    from mdloader_plugin.loader.loader import MDLoader
    from mdloader_plugin.store.shard import ShardStore
    from mdloader_plugin.mpi.world import World

    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    world = World.detect()
    files, single = _data(world)
    stores = {"multi": ShardStore.from_files(world, files), "single": ShardStore.from_file(
        world, single)}
    result = {"ranks": world.size, "batch": 32, "sizes": SIZES, "steps": args.steps,
              "rounds": args.rounds, "backends": {}}
    for backend in ("onesided", "collective"):
        loaders = {k: MDLoader(s, batch_size=32, backend=backend, prefetch=0, seed=2)
                   for k, s in stores.items()}
        times = {k: [] for k in loaders}
        for _ in range(args.rounds):
            for k, ld in loaders.items():
                times[k] += _fetch_times(ld, backend, min(args.steps, len(ld)), world.comm)
        med = {k: float(np.median(v)) * 1e3 for k, v in times.items()}
        result["backends"][backend] = {"median_ms": med, "ratio": med["multi"] / med["single"]}
        for ld in loaders.values():
            ld.close()
    for s in stores.values():
        s.close()
    if world.rank == 0:
        (HERE / "results").mkdir(exist_ok=True)
        result["date"] = time.strftime("%F %H:%M UTC", time.gmtime())
        result["record"] = record(args, mpi=rank_mpi())
        (HERE / "results" / "multi.json").write_text(json.dumps(result, indent=1))
        for b, r in result["backends"].items():
            print(f"{b}: multi {r['median_ms']['multi']:.3f} ms, single "
                  f"{r['median_ms']['single']:.3f} ms, ratio {r['ratio']:.3f}")


if __name__ == "__main__":
    main()
