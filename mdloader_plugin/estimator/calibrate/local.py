"""Stages 1-3: local record gathers (``memcpy``), the step scan, hindexed datatypes."""

from __future__ import annotations


import numpy as np

from ..fit import nnls_relative, positive
from ..timing import CalibrationSetup, max_array, max_over, median_time
from ...backends.base import exclusive_cumsum, gather_local
from .result import FLOOR_S, Result, bw_floor, fit_source, note_fit


# -- 1. local copies -------------------------------------------------------------------------
def measure_memcpy(world, setup: CalibrationSetup, res: Result) -> None:
    """Stage ``local``: gathering records on one rank, fitted into a cost a record
    (``mem.t_sample``) and a memcpy bandwidth (``mem.bw``)."""
    rng = np.random.default_rng(world.rank)
    buf = np.full(8 << 20, 7, dtype=np.uint8)
    rows = []
    for m in setup.sizes:
        for k in (1, 16, 64):
            src = rng.integers(0, buf.size - m, size=k)
            nb = np.full(k, m, dtype=np.int64)
            out = np.empty(k * m, dtype=np.uint8)
            dst = exclusive_cumsum(nb)
            t = median_time(lambda: gather_local(buf, src, nb, out, dst), setup.reps,
                             budget=setup.point_budget("memcpy", 3 * len(setup.sizes)))
            rows.append((k, k * m, t))
    k, b, y = map(np.array, zip(*rows))
    y = max_array(world.comm, y)
    fit = nnls_relative({"t_sample": k, "per_byte": b}, y, lower={"per_byte": bw_floor(b, y)})
    res.set("mem.t_sample", positive(fit.coef["t_sample"], FLOOR_S), fit_source("memcpy", fit))
    res.set("mem.bw", 1.0 / max(fit.coef["per_byte"] or 0.0, 1e-13), fit_source("memcpy", fit))
    worst = fit.worst_row
    note_fit(res, "memcpy", fit, f"{k[worst]} records of {b[worst] // max(k[worst], 1)} B")


# -- 2. step scan (collective backend) ---------------------------------------------------------
def measure_plan_scan(world, setup: CalibrationSetup, res: Result) -> None:
    """The collective backend's cost an id of scanning the whole world's step for its own ids."""
    n = 200_000
    ids = np.random.default_rng(1).permutation(n).reshape(-1, 1000)
    lo, hi = n // 4, n // 2

    def scan():
        flat = ids.reshape(-1)
        mask = (flat >= lo) & (flat < hi)
        np.repeat(np.arange(ids.shape[0]), ids.shape[1])[mask]

    t = max_over(world.comm, median_time(scan, setup.reps, budget=setup.point_budget("plan", 2)))
    res.set("coll.t_plan_id", positive(t / n, 1e-10),
            f"calibrate: scan of a {n}-id whole-world step, {t * 1e3:.2f} ms")
    measure_counts(world, setup, res)


COUNT_RANKS = (1 << 12, 1 << 16)  # world sizes whose count arrays are timed


def measure_counts(world, setup: CalibrationSetup, res: Result) -> None:
    """``coll.t_count``: a rank's cost a rank of the ``Alltoallv`` count and displacement
    arrays (two ``bincount`` of a step's 32 records over ``P`` ranks and their prefix sums, as
    the collective backend builds them), the slope between two world sizes."""
    rng = np.random.default_rng(2)
    ts = []
    for p in COUNT_RANKS:
        dest, nb = rng.integers(0, p, 32), rng.integers(1000, 5000, 32).astype(np.float64)

        def counts():
            for _ in range(2):  # send and receive
                exclusive_cumsum(np.bincount(dest, weights=nb, minlength=p).astype(np.int64))

        ts.append(max_over(world.comm, median_time(counts, setup.reps,
                                                    budget=setup.point_budget("plan", 4))))
    per = (ts[1] - ts[0]) / (COUNT_RANKS[1] - COUNT_RANKS[0])
    res.set("coll.t_count", positive(per, 1e-9),
            f"calibrate: count arrays at P = {COUNT_RANKS[0]} and {COUNT_RANKS[1]}, "
            f"{ts[0] * 1e6:.1f} and {ts[1] * 1e6:.1f} us")


# -- 3. datatypes ----------------------------------------------------------------------------
def measure_dtype(world, setup: CalibrationSetup, res: Result) -> None:
    """The cost of building and committing an MPI indexed datatype, a block."""
    from mpi4py import MPI

    nb = [1000] * 16
    displs = list(range(0, 16 * 4096, 4096))

    def make():
        MPI.BYTE.Create_hindexed(nb, displs).Commit().Free()

    t = max_over(world.comm, median_time(make, setup.reps * 4,
                                           budget=setup.point_budget("dtype", 1)))
    res.set("os.t_dtype", positive(t, FLOOR_S), "calibrate: Create_hindexed + Commit + Free, "
            "16 blocks, median")
