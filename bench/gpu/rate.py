"""Can the loader keep a GPU fed? A trainer stand-in at GPU step rates (make bench).

Per rank a trainer stand-in takes a batch, then spends ``step_ms``: a GIL-held Python part
(``GIL_SHARE`` of the step, a busy Python loop: the kernel launches, optimizer bookkeeping and
autograd glue of an eager PyTorch step, which hold the GIL while the model is small and
launch-bound) and a GIL-free part (``time.sleep``: the GPU computing while the host waits in a
synchronising call, which releases the GIL). 25 % GIL-held is the issue's probe at 2 ms (0.5 +
1.5) and the optimistic end for small graph models (~10 us of host time a kernel against 10-40
us of GPU time); a busy loop is the worst case for a producer thread (torch's own bindings drop
the GIL around each dispatch, a Python loop never does). Step times 2, 5, 10, 20 ms; 0 ms is the
loader alone (its ceiling in samples/s). Molecules batch 32/128, OC20-like batch 8/32; 2 and 4
ranks, one ``mpiexec`` job a rank count, every loader alive at once and measured in interleaved
order (step time outer, loader inner, ``--repeats`` rounds), so the machine's noise hits them
alike.

Reported per (data set, ranks, batch, step time, loader): data-wait share (time the trainer spent
in ``next(loader)`` over the wall time, max and mean over ranks) and sustained samples/s over all
ranks (samples served / slowest rank's wall time). Writes ``bench/results/gpu_rate.json`` and
``bench/gpu_rate.png`` (data-wait vs step time per loader).

    python -m bench.gpu.rate [--ranks 2,4] [--steps 100] [--repeats 2] [--graphs N]
        [--loaders collective,auto,...] [--step-ms 0,2,5,10,20] [--datasets hydragnn,oc20]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.gpu.feeders import LOADERS, make
from bench.harness import BENCH as HERE, module, record
from bench.loaders import compare as lb  # data sets, mpiexec, machine

GIL_SHARE = 0.25
STEP_MS = (0, 2, 5, 10, 20)
BATCHES = {"hydragnn": (32, 128), "oc20": (8, 32)}
WARM_STEPS = 4  # a step time's first steps (the producer refills after the previous config)
FIRST_WARM = 16  # a loader's very first steps (thread start, auto's online trial)


def busy(seconds: float) -> None:
    """Hold the GIL for ``seconds`` (pure Python, as launching kernels does)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Trainer:
    """One step: ``gil`` seconds of GIL-held Python, then ``gpu`` seconds GIL-free."""

    def __init__(self, step_ms: float):
        self.gil = GIL_SHARE * step_ms / 1e3
        self.gpu = step_ms / 1e3 - self.gil

    def step(self, batch) -> None:
        if self.gil:
            busy(self.gil)
        if self.gpu:
            time.sleep(self.gpu)


def trainer_alone_ms(step_ms: float, steps: int, rounds: int = 3) -> float:
    """The stand-in's real step with no loader (``time.sleep`` overshoots on a VM): what a
    row's samples/s is read against, so that GIL contention that slows the trainer's own step,
    which data-wait does not see, shows. Median of `rounds`."""
    tr, runs = Trainer(step_ms), []
    for _ in range(rounds):
        for _ in range(WARM_STEPS):
            tr.step(None)
        t0 = time.perf_counter()
        for _ in range(steps):
            tr.step(None)
        runs.append((time.perf_counter() - t0) / steps * 1e3)
    return sorted(runs)[len(runs) // 2]


def measure(world, it, trainer: Trainer, steps: int, warm: int) -> dict:
    """Collective: ``warm`` + ``steps`` trainer steps; this rank's wait and wall, reduced."""
    from mpi4py import MPI

    comm = world.comm
    for _ in range(warm):
        trainer.step(next(it))
    comm.Barrier()
    wait, t0 = 0.0, time.perf_counter()
    for _ in range(steps):
        tw = time.perf_counter()
        batch = next(it)
        wait += time.perf_counter() - tw
        trainer.step(batch)
        del batch
    wall = time.perf_counter() - t0
    share = wait / wall
    return {"wall_s": comm.allreduce(wall, op=MPI.MAX),
            "wait_share_max": comm.allreduce(share, op=MPI.MAX),
            "wait_share_mean": comm.allreduce(share, op=MPI.SUM) / world.size,
            "wait_ms_per_step_max": comm.allreduce(wait / steps, op=MPI.MAX) * 1e3}


def worker(a) -> None:
    import torch

    from mdloader_plugin.core.log import get_logger
    from mdloader_plugin.mpi.world import World

    torch.set_num_threads(1)
    world = World.detect()
    get_logger(world.rank).setLevel("WARNING")
    names = a.loaders.split(",")
    if any(n.startswith("hydragnn") for n in names):
        from mdloader_plugin.integrations.hydragnn.compat import init_distributed

        init_distributed(world.comm, single_node=True)  # HydraGNN's DistributedSampler
    rows = []
    for ds in a.datasets.split(","):
        rows += bench_dataset(world, ds, a, names)
    if world.rank == 0:
        Path(a.tmp).write_text(json.dumps(rows))
    world.close()


def bench_dataset(world, ds: str, a, names: list[str]) -> list[dict]:
    from mdloader_plugin.records import codec
    from mdloader_plugin.batching.pyg import pyg_sample
    from mdloader_plugin.store.shard import ShardStore

    path = str(lb.WORK / f"{ds}-{lb.DATASETS[ds]}.bp")
    store = ShardStore.from_file(world, path)
    lo, hi = store.local_range
    local = [pyg_sample({k: v.copy() for k, v in codec.decode(store.local_record(i)).items()})
             for i in range(lo, hi)]
    rows = []
    for b in [b for b in BATCHES[ds] if not a.batches or b in a.batches]:
        feeds = {n: make(n, store, path, world, b, local) for n in names}
        first = set(names)
        acc: dict[tuple, list] = {}
        for _ in range(a.repeats):
            for ms in a.step_ms:
                for n in names:
                    warm = FIRST_WARM if n in first else WARM_STEPS
                    first.discard(n)
                    acc.setdefault((ms, n), []).append(
                        measure(world, feeds[n][0], Trainer(ms), a.steps, warm))
        for n in names:
            feeds[n][1]()
        for (ms, n), runs in acc.items():
            rows.append(_row(ds, world.size, b, ms, n, runs, a.steps))
            if world.rank == 0:
                r = rows[-1]
                print(f"  {ds} P={world.size} B={b} {ms:2g} ms {n:16s} wait "
                      f"{100 * r['wait_share_max']:5.1f}% {r['samples_per_s']:8.0f} samples/s",
                      flush=True)
    store.close()
    return rows


def _row(ds, ranks, b, ms, name, runs, steps) -> dict:
    wall = sum(r["wall_s"] for r in runs)
    return {"dataset": ds, "ranks": ranks, "batch": b, "step_ms": ms,
            "gil_ms": GIL_SHARE * ms, "gpu_ms": (1 - GIL_SHARE) * ms, "loader": name,
            "steps": steps * len(runs), "repeats": len(runs),
            "wait_share_max": max(r["wait_share_max"] for r in runs),
            "wait_share_mean": sum(r["wait_share_mean"] for r in runs) / len(runs),
            "wait_ms_per_step_max": max(r["wait_ms_per_step_max"] for r in runs),
            "samples_per_s": b * ranks * steps * len(runs) / wall}


def _load_note(m: dict) -> str:
    """How busy the machine was before the run: another job's load makes the figures relative."""
    start, end = m["loadavg_start"][0], m["loadavg_end"][0]
    if start < 1.0:
        return (f"otherwise idle (load average {start} before the run, {end} at its end, the "
                "run's own ranks).")
    return (f"shared with other jobs (load average {start} at start, {end} at end): wall-clock "
            "figures from a loaded machine, read them as relative.")


def tables(result: dict) -> list[str]:
    """Markdown for bench/RESULTS.md: data-wait % at each step time, and the loader alone."""
    rows, m = result["rows"], result["machine"]
    steps = sorted({r["step_ms"] for r in rows if r["step_ms"] > 0})
    by = {(r["dataset"], r["ranks"], r["batch"], r["loader"], r["step_ms"]): r for r in rows}
    out = [f"{result['steps']} measured steps x {result['repeats']} interleaved rounds a "
           f"configuration, graphs {result['graphs']}, trainer step {100 * result['gil_share']:.0f}"
           f"% GIL-held Python + the rest GIL-free; {m['cores']} cores, " + _load_note(m), "",
           "| data | ranks | batch | loader | " + " | ".join(f"wait % @{s:g} ms" for s in steps)
           + " | samples/s @2 ms | loader alone, samples/s |",
           "|---|---:|---:|---|" + "---:|" * (len(steps) + 2)]
    for ds, p, b, name in sorted({k[:4] for k in by}, key=lambda k: (k[0], k[1], k[2],
                                                                       LOADERS.index(k[3]))):
        waits = [f"{100 * by[(ds, p, b, name, s)]['wait_share_max']:.1f}"
                 if (ds, p, b, name, s) in by else "–" for s in steps]
        two, alone = by.get((ds, p, b, name, 2.0)), by.get((ds, p, b, name, 0.0))
        out.append(f"| {ds} | {p} | {b} | {name} | " + " | ".join(waits) +
                   f" | {two['samples_per_s']:.0f} |" * bool(two) + " – |" * (not two) +
                   (f" {alone['samples_per_s']:.0f} |" if alone else " – |"))
    return out


def figure(result: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["rows"] if r["step_ms"] > 0]
    panels = sorted({(r["dataset"], r["batch"]) for r in rows})
    ranks = sorted({r["ranks"] for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 5.2), squeeze=False)
    for ax, (ds, b) in zip(axes[0], panels):
        for i, name in enumerate(LOADERS):
            for p, ls in zip(ranks, ("-", "--", ":")):
                pts = sorted((r["step_ms"], 100 * r["wait_share_max"]) for r in rows
                             if (r["dataset"], r["batch"], r["loader"], r["ranks"])
                             == (ds, b, name, p))
                if pts:
                    ax.plot(*zip(*pts), ls, marker="o", color=f"C{i}", ms=3,
                            label=f"{name} P={p}")
        ax.axhline(2, color="grey", lw=0.8)
        ax.set(title=f"{ds} batch {b}", xlabel="trainer step (ms), 25% GIL-held",
               ylabel="data-wait (% of wall, max over ranks)", xscale="log", ylim=(0, 100))
        ax.set_yscale("symlog", linthresh=1)
        steps = sorted({r["step_ms"] for r in rows})
        ax.set_xticks(steps, [f"{x:g}" for x in steps])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    fig.legend(*axes[0][0].get_legend_handles_labels(), fontsize=7, ncol=4, loc="lower center")
    idle = result["machine"]["loadavg_start"][0] < 1.0
    fig.suptitle(f"GPU-rate consumer, {result['machine']['cores']} "
                 f"{'otherwise idle' if idle else 'shared'} cores, "
                 f"{result['machine']['date']} (grey: the 2% target)", fontsize=9)
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--datasets", default="hydragnn,oc20")
    ap.add_argument("--batches", help="comma list restricting BATCHES (default: all)")
    ap.add_argument("--step-ms", default=",".join(map(str, STEP_MS)))
    ap.add_argument("--loaders", default=",".join(LOADERS))
    ap.add_argument("--steps", type=int, default=100, help="measured steps a config and round")
    ap.add_argument("--repeats", type=int, default=2, help="interleaved rounds")
    ap.add_argument("--graphs", type=int, help="graphs in every synthetic set")
    ap.add_argument("--out", default=str(lb.RESULTS / "gpu_rate.json"))
    ap.add_argument("--figure", default=str(HERE / "gpu_rate.png"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.step_ms = [float(x) for x in a.step_ms.split(",")]
    a.batches = [int(x) for x in a.batches.split(",")] if a.batches else None
    if a.graphs:
        lb.DATASETS.update({k: a.graphs for k in lb.DATASETS})
    if a.worker:
        return worker(a)
    from bench.ddstore import real as ddstore_real

    if "ddstore-real" in a.loaders.split(",") and not ddstore_real.available():
        print("note: pyddstore is not importable (run tools/build_ddstore.sh): its rows skipped")
        a.loaders = ",".join(n for n in a.loaders.split(",") if n != "ddstore-real")
    lb.RESULTS.mkdir(parents=True, exist_ok=True)
    lb.make_data(a.datasets.split(","))
    info = lb.machine()
    alone = {f"{ms:g}": trainer_alone_ms(ms, a.steps) for ms in a.step_ms if ms > 0}
    rows = []
    for p in [int(x) for x in a.ranks.split(",")]:
        tmp = lb.RESULTS / f".gpu_rate-{p}.json"
        t0 = time.perf_counter()
        args = [*module("bench.gpu.rate"), "--worker", "--tmp", str(tmp)] + [
            x for k in ("datasets", "loaders", "steps", "repeats")
            for x in (f"--{k}", str(getattr(a, k)))]
        args += ["--step-ms", ",".join(f"{x:g}" for x in a.step_ms)]
        args += ["--batches", ",".join(map(str, a.batches))] if a.batches else []
        args += ["--graphs", str(a.graphs)] if a.graphs else []
        lb.mpiexec(p, args, timeout=3600)
        rows += json.loads(tmp.read_text())
        tmp.unlink()
        print(f"  {p} ranks done in {time.perf_counter() - t0:.0f} s", flush=True)
    info["loadavg_end"] = [round(x, 2) for x in __import__("os").getloadavg()]
    result = {"record": record(a), "machine": info, "gil_share": GIL_SHARE, "steps": a.steps,
        "repeats": a.repeats,
              "graphs": dict(lb.DATASETS), "trainer_alone_ms": alone, "rows": rows}
    Path(a.out).write_text(json.dumps(result, indent=1))
    print(f"wrote {a.out}, {figure(result, Path(a.figure))}")


if __name__ == "__main__":
    main()
