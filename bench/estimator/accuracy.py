"""How often does `backend: auto` pick the faster backend on this machine? (``make bench``)

Grid: ranks {2,3,4,6,8} x batch {1,4,16,64,256,512} x two record-size distributions
(HydraGNN-like ~2-10 KB, OC20-like ~5-200 KB). For every configuration both backends run for real
(``mpiexec``, the backends' ``fetch`` on a synthetic store, a few steps, median of the max over
ranks) and the calibrated cost model predicts both. Reports the fraction of right picks, regret
(auto's measured time over the best backend's: geometric mean and worst), auto against each single
backend, with the model alone and with the online trial (which switches when the other backend is
measured >5% faster). Writes ``bench/results/estimator_accuracy.json``,
``bench/estimator_pred_vs_meas.png`` and the model-output crossover map
``bench/estimator_crossover_perlmutter.png``.

    python -m bench.estimator.accuracy [--quick] [--profile PROFILE.json]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from bench.harness import BENCH, RESULTS, module, record
from bench.harness import mpiexec as _mpiexec

DISTS = {"hydragnn": (5000.0, 0.35, 2000, 10000), "oc20": (40000.0, 0.8, 5000, 200000)}
BACKENDS = ("onesided", "collective")


def record_sizes(dist: str, n: int, seed: int = 0) -> np.ndarray:
    """Log-normal record sizes clipped to the distribution's range (same on every rank)."""
    median, sigma, lo, hi = DISTS[dist]
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(math.log(median), sigma, n), lo, hi).astype(np.int64)


# -- worker: runs under mpiexec --------------------------------------------------------------
def worker(batches: list[int], steps: int, out: str) -> None:
    from mdloader_plugin.backends import get_backend
    from mdloader_plugin.core.blocks import block_bounds
    from mdloader_plugin.store.shard import ShardStore
    from mdloader_plugin.mpi.world import World

    world = World.detect()
    rows = []
    for dist in DISTS:
        n = world.size * max(batches)
        sizes = record_sizes(dist, n)
        b = block_bounds(n, world.size)
        store = ShardStore.from_records(world, sizes[b[world.rank]:b[world.rank + 1]],
                                        lambda buf, offs: buf.fill(1), n)
        for name in BACKENDS:
            backend = get_backend(name)(store, world)
            for batch in batches:
                t = _time_steps(world, backend, n, batch, steps)
                rows.append({"dist": dist, "ranks": world.size, "batch": batch, "backend": name,
                             "measured_s": t, "mean_bytes": float(sizes.mean()),
                             "std_bytes": float(sizes.std())})
            backend.close()
        store.close()
    if world.rank == 0:
        Path(out).write_text(json.dumps(rows))
    world.close()


def _time_steps(world, backend, n: int, batch: int, steps: int) -> float:
    from mpi4py import MPI

    rng = np.random.default_rng(batch)
    times = []
    for _ in range(steps + 1):
        plan = rng.permutation(n)[:world.size * batch].reshape(world.size, batch)
        world.comm.Barrier()
        t = time.perf_counter()
        backend.fetch(plan)
        times.append(world.comm.allreduce(time.perf_counter() - t, op=MPI.MAX))
    return float(np.median(times[1:]))


# -- driver ------------------------------------------------------------------------------------
def mpiexec(n: int, args: list[str], timeout: float) -> None:
    """A job of `n` ranks, output captured (its stderr's tail on failure)."""
    _mpiexec(n, args, timeout, capture=True)


def measure(ranks: list[int], batches: list[int], steps: int) -> list[dict]:
    rows = []
    for p in ranks:
        tmp = RESULTS / f".accuracy-{p}.json"
        t0 = time.perf_counter()
        mpiexec(p, [*module("bench.estimator.accuracy"), "--worker", "--batches",
            ",".join(map(str, batches)),
                    "--steps", str(steps), "--out", str(tmp)], timeout=600)
        rows += json.loads(tmp.read_text())
        tmp.unlink()
        print(f"  measured {p} ranks in {time.perf_counter() - t0:.0f} s", flush=True)
    return rows


def evaluate(rows: list[dict], profile, margin: float = 0.05) -> dict:
    """Join measured rows per configuration with the model's predictions and score the picks."""
    from mdloader_plugin.estimator import Workload, choose

    configs: dict[tuple, dict] = {}
    for r in rows:
        key = (r["dist"], r["ranks"], r["batch"])
        c = configs.setdefault(key, {"dist": r["dist"], "ranks": r["ranks"], "batch": r["batch"],
                                     "measured_s": {}, "mean_bytes": r["mean_bytes"],
                                     "std_bytes": r["std_bytes"]})
        c["measured_s"][r["backend"]] = r["measured_s"]
    out = []
    for c in configs.values():
        w = Workload(c["ranks"], c["batch"], c["mean_bytes"], c["std_bytes"], c["ranks"])
        d = choose(w, profile)
        m = c["measured_s"]
        best = min(m, key=m.get)
        other = next(k for k in m if k != d.backend)
        online = other if m[other] < m[d.backend] * (1 - margin) else d.backend
        out.append({**c, "predicted_s": d.predicted_s, "auto": d.backend, "best": best,
                    "auto_online": online})
    return {"configs": out, "summary": summarise(out)}


def summarise(configs: list[dict]) -> dict:
    def ratios(pick):
        return np.array([c["measured_s"][pick(c)] / c["measured_s"][c["best"]] for c in configs])

    def geo(x):
        return float(np.exp(np.mean(np.log(x))))

    s = {"configs": len(configs)}
    for label, pick in (("model", lambda c: c["auto"]), ("online", lambda c: c["auto_online"])):
        r = ratios(pick)
        s[label] = {"right_pick_fraction": float(np.mean(r <= 1.0 + 1e-12)),
                    "regret_geomean": geo(r) - 1.0, "regret_worst": float(r.max()) - 1.0,
                    "auto_vs": {b: geo(np.array([c["measured_s"][pick(c)] / c["measured_s"][b]
                                                 for c in configs])) for b in BACKENDS}}
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="ranks {2,4}, batch {1,16,256}, 3 steps")
    ap.add_argument("--profile", help="calibrated profile to use (default: calibrate now)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--batches", help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=5, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker([int(x) for x in a.batches.split(",")], a.steps, a.out)
    from bench.estimator import plots as estimator_plots
    from mdloader_plugin.estimator import get_profile

    RESULTS.mkdir(parents=True, exist_ok=True)
    ranks, batches, steps = (([2, 4], [1, 16, 256], 3) if a.quick else
                             ([2, 3, 4, 6, 8], [1, 4, 16, 64, 256, 512], 5))
    prof_path = a.profile or str(RESULTS / "profile-local.json")
    if not a.profile:
        print("calibrating (4 ranks) ...", flush=True)
        mpiexec(4, ["-m", "mdloader_plugin", "calibrate", "--out", prof_path], timeout=300)
    profile = get_profile(prof_path)
    print(f"measuring {len(ranks) * len(batches) * len(DISTS)} configurations x "
          f"{len(BACKENDS)} backends ...", flush=True)
    result = evaluate(measure(ranks, batches, steps), profile)
    result.update(profile=prof_path, quick=a.quick, steps=steps,
                  date=time.strftime("%F %H:%M UTC", time.gmtime()), record=record(a))
    out = RESULTS / "estimator_accuracy.json"
    out.write_text(json.dumps(result, indent=1))
    estimator_plots.predicted_vs_measured(result, BENCH / "estimator_pred_vs_meas.png")
    estimator_plots.crossover_map(get_profile("perlmutter"),
                                  BENCH / "estimator_crossover_perlmutter.png")
    print(json.dumps(result["summary"], indent=1))
    print(f"wrote {out}, bench/estimator_pred_vs_meas.png, "
          "bench/estimator_crossover_perlmutter.png")


if __name__ == "__main__":
    main()
