"""Stepping a loader as the side-by-side benchmark does (``bench/loaders/compare.py``): a step
timed from "give me the next batch" to a collated batch on every rank, reduced with MAX over
ranks, and the memory it holds (PSS, peak RSS).
"""

from __future__ import annotations

import time

import numpy as np


# -- memory --------------------------------------------------------------------------------------
def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def pss() -> int:
    """Proportional set size of this process in bytes."""
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def reset_peak() -> None:
    """Reset VmHWM (peak RSS) to the current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


# -- stepping ------------------------------------------------------------------------------------
class MDLStepper:
    """The k-th call returns (fetch_s, batch) of MDLoader's k-th step, across epochs."""

    warms_up = True  # the first step starts the producer and the online trial

    def __init__(self, loader):
        self.loader, self.epoch, self.it = loader, 0, None
        self._tail = None  # batches still to skip after the online trial ended

    def __call__(self, k: int):
        if self.it is None:
            self.loader.set_epoch(self.epoch)
            self.it = iter(self.loader)
        try:
            batch = next(self.it)
        except StopIteration:
            self.epoch += 1
            self.loader.set_epoch(self.epoch)
            self.it = iter(self.loader)
            batch = next(self.it)
        return self.loader.epoch_stats.step_fetch_s[-1], batch

    def warm(self) -> bool:
        """Still in auto's online trial (probing the other backend), or serving batches the
        producer fetched during it? The producer runs up to ``prefetch + 1`` steps ahead of the
        trainer, so that many batches after the decision may still come from the probe."""
        on = self.loader._online
        if on is None:
            return False
        if on.active:
            return True
        if self._tail is None:
            self._tail = self.loader.prefetch + 1
        self._tail -= 1
        return self._tail >= 0


class PlanStepper:
    def __init__(self, loader, sampler):
        self.loader, self.spe = loader, sampler.steps_per_epoch
        self.warms_up = loader.name != "file"  # per-sample file reads have nothing to warm

    def __call__(self, k: int):
        return self.loader.step(k // self.spe, k % self.spe)

    def warm(self) -> bool:
        return False


PSS_EVERY = 3  # PSS is read after every PSS_EVERY-th step, and the step after a read is not timed


def run_steps(world, stepper, steps: int, budget: float) -> dict:
    """Time `steps` steps after warm-up (or fewer, >= 1, once `budget` seconds have run out).

    Peak PSS is sampled after every ``PSS_EVERY``-th step (and every warm-up step), and the step
    right after a sample is run but not timed: reading ``/proc/self/smaps_rollup`` walks every
    mapping and leaves caches and TLB cold, which tripled the next fetch at small batches
    (0.05 -> 0.16 ms, MDLoader and the real DDStore alike; bench/fetch/profile.py,
    2026-12-04). Steady-state memory is the same step after step, so the peak is kept.
    ``--pss-every 1`` restores the old harness (a sample after every step, every step timed)."""
    from mpi4py import MPI

    comm = world.comm
    k, nodes, warm = 0, {}, 0
    t_step, t_fetch, peak_pss = [], [], pss()
    t_start = time.perf_counter()
    sampled = True  # PSS was read just before this step
    while True:
        elapsed = comm.allreduce(time.perf_counter() - t_start, op=MPI.MAX)  # also the step sync
        measured = len(t_step)
        if measured >= steps or (measured >= 1 and elapsed > budget):
            break
        t0 = time.perf_counter()
        fetch, batch = stepper(k)
        dt = time.perf_counter() - t0
        nodes[k] = int(batch.num_nodes)
        warming = (k == 0 and stepper.warms_up) or (stepper.warm() and k < 40)
        warm += warming
        if not warming and not (sampled and PSS_EVERY > 1):
            t_step.append(dt)
            t_fetch.append(np.nan if fetch is None else fetch)
        del batch
        sampled = k % PSS_EVERY == 0 or warming
        if sampled:
            peak_pss = max(peak_pss, pss())
        k += 1
    from mdloader_plugin.store.load import trim_heap

    trim_heap()  # what is left once the allocator hands its free blocks back to the OS
    return {"step": t_step, "fetch": t_fetch, "nodes": nodes, "warm": warm, "pss": peak_pss,
            "live_pss": pss()}


def reduce_max(world, values: list[float]) -> np.ndarray:
    from mpi4py import MPI

    a = np.asarray(values, dtype=np.float64)
    out = np.empty_like(a)
    world.comm.Allreduce(a, out, op=MPI.MAX)
    return out


def summarise(world, res: dict, base_pss: int) -> dict:
    """Collective: per-step times reduced with MAX over ranks, memory maxima over ranks."""
    return {"step": reduce_max(world, res["step"]), "fetch": reduce_max(world, res["fetch"]),
            "warm": res["warm"], "nodes": res["nodes"],
            "peak_rss_mib": world.comm.allreduce(_status("VmHWM"), op=_max()) / 2**20,
            "data_pss_mib": world.comm.allreduce(res["pss"] - base_pss, op=_max()) / 2**20,
            "trimmed_pss_mib": world.comm.allreduce(res["live_pss"] - base_pss,
                                                    op=_max()) / 2**20}


def merge(runs: list[dict]) -> dict:
    """Statistics over the steps of all repeats of one configuration."""
    step = np.concatenate([r["step"] for r in runs])
    fetch = np.concatenate([r["fetch"] for r in runs])
    fetch_ok = bool(np.isfinite(fetch).all())
    out = {"steps": int(step.size), "repeats": len(runs),
           "warmup_steps": int(sum(r["warm"] for r in runs)),
           "step_median_s": float(np.median(step)), "step_p95_s": float(np.percentile(step, 95)),
           "fetch_median_s": float(np.median(fetch)) if fetch_ok else None,
           "fetch_p95_s": float(np.percentile(fetch, 95)) if fetch_ok else None,
           "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
           "data_pss_mib": max(r["data_pss_mib"] for r in runs),
           "trimmed_pss_mib": max(r["trimmed_pss_mib"] for r in runs)}
    for k in ("chosen_backend", "backends_used"):
        if k in runs[-1]:
            out[k] = runs[-1][k]
    return out


def _max():
    from mpi4py import MPI

    return MPI.MAX
