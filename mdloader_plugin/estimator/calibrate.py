"""Micro-benchmarks that measure this machine's cost-model parameters, and the fit.

``mpiexec -n P mdloader calibrate --out PROFILE.json`` runs, on all ranks at once (so the
numbers include the contention a real step sees):

1. ``memcpy``   local record gathers (k records of m bytes)        -> mem.t_sample, mem.bw
2. ``plan``     scanning a global plan of P*B ids                   -> coll.t_plan_id
3. ``dtype``    create + commit + free of hindexed datatypes         -> os.t_dtype
4. ``get``      Gets from n owners, b blocks of m bytes, one Flush   -> os.t_flush_*, os.t_get_*,
                (owners on this node, then on other nodes)              os.t_block, os.bw_*
5. ``alltoallv`` on sub-communicators of 2..P ranks by bytes        -> coll.t_sync, coll.t_peer_*,
                                                                        coll.bw_*
6. ``backends`` a few real steps of each backend at small batches    -> os.t_step, coll.t_step
                (what the micro-benchmarks miss: the backends' own Python work per step)

Each series is fitted by non-negative least squares on relative error (``fit.py``). Intra- and
inter-node parameters come from separate series (owners picked by ``World.node_of``), so a run
across nodes (or hosts of ``mdloader cluster``) prices an on-node owner apart from an off-node one.
A level without a pair (all ranks on one node: no inter; one rank a node: no intra) gets the
other level's values and a source that says so. With one owner count only (2 ranks a node: one
on-node peer) a Get's issue cost cannot be told from the flush: the flush takes it all and
``t_get`` comes from the other level, capped at this level's flush. Quick mode (tests) uses fewer sizes and repetitions; the
full run takes ~20-40 s on 4 ranks of a 2-core machine.
"""

from __future__ import annotations

import datetime as _dt
import platform
import socket
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .fit import nnls_relative, positive
from .models import Workload, get_model
from .profile import Profile, validate_params

FLOOR_S, FLOOR_BW = 1e-8, 1e7


@dataclass
class Plan:
    """Sizes and repetitions of a calibration run."""

    reps: int = 15
    sizes: tuple[int, ...] = (256, 4096, 65536)
    blocks: tuple[int, ...] = (1, 8, 32)
    # up to 1 MiB a pair: across nodes the per-byte term must stand out of the per-peer latency
    a2a_sizes: tuple[int, ...] = (0, 1024, 16384, 131072, 1 << 20)
    steps: int = 12

    @classmethod
    def quick(cls) -> "Plan":
        return cls(reps=5, sizes=(1024, 32768), blocks=(1, 8), a2a_sizes=(0, 4096, 65536, 1 << 19),
                   steps=5)


@dataclass
class Result:
    params: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    quality: dict[str, float] = field(default_factory=dict)
    gaps: dict[str, str] = field(default_factory=dict)  # key -> why it was not measured

    def set(self, key: str, value: float, source: str) -> None:
        self.params[key], self.sources[key] = float(value), source


def run(world, plan: Plan | None = None, log: Callable[[str], None] = print) -> Profile:
    """Collective: measure, fit and return the profile (identical on every rank)."""
    plan = plan or Plan()
    say = log if world.rank == 0 else (lambda _msg: None)
    res, t0 = Result(), time.perf_counter()
    stages = [("memcpy", _memcpy), ("plan", _plan_scan), ("dtype", _dtype), ("get", _gets),
              ("alltoallv", _alltoallv), ("backends", _backends)]
    for i, (name, fn) in enumerate(stages, 1):
        ts = time.perf_counter()
        fn(world, plan, res)
        world.comm.Barrier()
        say(f"calibrate: [{i}/{len(stages)}] {name} done in {time.perf_counter() - ts:.1f} s")
    res = world.comm.bcast(res, root=0)  # rank 0's fit is the profile, for everyone
    validate_params(res.params, "calibration result")
    return _profile(world, res, time.perf_counter() - t0)


# -- helpers ---------------------------------------------------------------------------------
def _median_time(fn: Callable[[], None], reps: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def _max_over(comm, value: float) -> float:
    from mpi4py import MPI

    return float(comm.allreduce(value, op=MPI.MAX))


def _max_array(comm, values: np.ndarray) -> np.ndarray:
    """Element-wise max over ranks (one collective for a whole series)."""
    from mpi4py import MPI

    out = np.empty_like(np.asarray(values, dtype=np.float64))
    comm.Allreduce(np.asarray(values, dtype=np.float64), out, op=MPI.MAX)
    return out


def _fit_source(name: str, fit) -> str:
    return f"calibrate: {name} fit, {fit.rows} points, relative rms error {fit.rel_rms:.0%}"


# -- 1. local copies -------------------------------------------------------------------------
def _memcpy(world, plan: Plan, res: Result) -> None:
    from ..backends.base import exclusive_cumsum, gather_local

    rng = np.random.default_rng(world.rank)
    buf = np.full(8 << 20, 7, dtype=np.uint8)
    rows = []
    for m in plan.sizes:
        for k in (1, 16, 64):
            src = rng.integers(0, buf.size - m, size=k)
            nb = np.full(k, m, dtype=np.int64)
            out = np.empty(k * m, dtype=np.uint8)
            dst = exclusive_cumsum(nb)
            t = _median_time(lambda: gather_local(buf, src, nb, out, dst), plan.reps)
            rows.append((k, k * m, t))
    k, b, y = map(np.array, zip(*rows))
    y = _max_array(world.comm, y)
    fit = nnls_relative({"t_sample": k, "per_byte": b}, y)
    res.set("mem.t_sample", positive(fit.coef["t_sample"], FLOOR_S), _fit_source("memcpy", fit))
    res.set("mem.bw", 1.0 / max(fit.coef["per_byte"] or 0.0, 1e-13), _fit_source("memcpy", fit))
    res.quality["memcpy"] = fit.rel_rms


# -- 2. plan scan (collective backend) -------------------------------------------------------
def _plan_scan(world, plan: Plan, res: Result) -> None:
    n = 200_000
    ids = np.random.default_rng(1).permutation(n).reshape(-1, 1000)
    lo, hi = n // 4, n // 2

    def scan():
        flat = ids.reshape(-1)
        mask = (flat >= lo) & (flat < hi)
        np.repeat(np.arange(ids.shape[0]), ids.shape[1])[mask]

    t = _max_over(world.comm, _median_time(scan, plan.reps))
    res.set("coll.t_plan_id", positive(t / n, 1e-10),
            f"calibrate: scan of a {n}-id global plan, {t * 1e3:.2f} ms")


# -- 3. datatypes ----------------------------------------------------------------------------
def _dtype(world, plan: Plan, res: Result) -> None:
    from mpi4py import MPI

    nb = [1000] * 16
    displs = list(range(0, 16 * 4096, 4096))

    def make():
        MPI.BYTE.Create_hindexed(nb, displs).Commit().Free()

    t = _max_over(world.comm, _median_time(make, plan.reps * 4))
    res.set("os.t_dtype", positive(t, FLOOR_S), "calibrate: Create_hindexed + Commit + Free, "
            "16 blocks, median")


# -- 4. one-sided Gets -----------------------------------------------------------------------
def _peers(world, same_node: bool) -> list[int]:
    me = world.node_of[world.rank]
    return [q for q in range(world.size)
            if q != world.rank and (world.node_of[q] == me) == same_node]


def _n_common(world, same_node: bool) -> int:
    """Owners every rank can use for this series (same loop count on every rank)."""
    counts = [sum(1 for q in range(world.size) if q != r
                  and (world.node_of[q] == world.node_of[r]) == same_node)
              for r in range(world.size)]
    return min(counts)


def _gets(world, plan: Plan, res: Result) -> None:
    from mpi4py import MPI

    from ..backends.onesided import start_progress_thread

    win_bytes = max(plan.sizes) * max(plan.blocks) * 2
    win = MPI.Win.Allocate(win_bytes, disp_unit=1, comm=world.comm)
    win.Lock_all(MPI.MODE_NOCHECK)
    # Gets are timed under the progress the one-sided backend will run with (across nodes its
    # own progress thread, which also shortens a flush)
    progress = start_progress_thread(world)
    try:
        for level, same in (("intra", True), ("inter", False)):
            n_max = _n_common(world, same)
            rows = _get_series(world, plan, win, _peers(world, same)[:n_max], win_bytes, MPI)
            _fit_gets(world, res, level, rows)
    finally:
        if progress is not None:
            progress.close()
        win.Unlock_all()
        win.Free()
    for key in ("os.t_flush", "os.t_get", "os.bw"):
        _fill_level(res, key)
    for level in ("intra", "inter"):  # an issue cost not told apart is at most the whole flush
        if f"os.t_get_{level}" in res.gaps:
            key = f"os.t_get_{level}"
            res.set(key, min(res.params[key], res.params[f"os.t_flush_{level}"]),
                    f"{res.sources[key]}; at most os.t_flush_{level}")


LEVEL_GAP = {"intra": "one rank a node, no on-node pair",
             "inter": "all ranks on one node, no inter-node pair"}


def _fill_level(res: Result, key: str) -> None:
    """Give `key`_intra / `key`_inter the other level's value where one was not measured."""
    have = [lvl for lvl in ("intra", "inter") if f"{key}_{lvl}" in res.params]
    for level in ("intra", "inter"):
        if level in have:
            continue
        if have:
            why = res.gaps.get(f"{key}_{level}", LEVEL_GAP[level])
            res.set(f"{key}_{level}", res.params[f"{key}_{have[0]}"],
                    f"copied from the {have[0]}-node value: {why}")
        else:  # only t_get: one owner a step at every level
            res.set(f"{key}_{level}", FLOOR_S, "not separable from the flush (one owner a step "
                    "at every level): issue cost counted in t_flush")


def _get_series(world, plan: Plan, win, peers: list[int], win_bytes: int, MPI) -> list:
    rows = []
    out = np.empty(win_bytes, dtype=np.uint8)
    counts = sorted({1, len(peers)} | ({2} if len(peers) > 2 else set())) if peers else []
    for n in counts:
        for m in plan.sizes:
            for b in plan.blocks:
                def step():
                    types = []
                    for j, q in enumerate(peers[:n]):
                        if b == 1:
                            win.Get([out[:m], MPI.BYTE], q, target=(j * m, m, MPI.BYTE))
                            continue
                        tt = MPI.BYTE.Create_hindexed([m] * b, list(range(0, 2 * b * m, 2 * m)))
                        tt.Commit()
                        types.append(tt)
                        win.Get([out[:b * m], MPI.BYTE], q, target=(0, 1, tt))
                    win.Flush_all()
                    for tt in types:
                        tt.Free()
                world.comm.Barrier()
                t = _median_time(step, plan.reps)
                rows.append((n, n * b, n * b * m, n * (b > 1), _max_over(world.comm, t)))
    return rows


def _fit_gets(world, res: Result, level: str, rows: list) -> None:
    if not rows:
        return
    n, blocks, nbytes, ndt, y = map(np.array, zip(*rows))
    y = np.maximum(y - ndt * res.params["os.t_dtype"], 1e-7)  # datatype cost measured apart
    cols = {"flush": np.ones_like(y), "get": n, "block": blocks, "per_byte": nbytes}
    if np.unique(n).size < 2:  # one owner count: "get" is a copy of "flush", not identifiable
        del cols["get"]
    fit = nnls_relative(cols, y)
    src = _fit_source(f"Get ({level}-node owners)", fit)
    res.set(f"os.t_flush_{level}", positive(fit.coef["flush"], FLOOR_S), src)
    if "get" in cols:
        res.set(f"os.t_get_{level}", positive(fit.coef["get"], FLOOR_S), src)
    else:
        res.gaps[f"os.t_get_{level}"] = (f"one {level}-node owner a rank, so a Get's issue cost "
                                         "is not separable from the flush")
    res.set(f"os.bw_{level}", 1.0 / max(fit.coef["per_byte"] or 0.0, 1e-13), src)
    if level == "intra" or "os.t_block" not in res.params:
        res.set("os.t_block", positive(fit.coef["block"], 1e-9), src)
    res.quality[f"get_{level}"] = fit.rel_rms


# -- 5. Alltoallv ------------------------------------------------------------------------------
def _alltoallv(world, plan: Plan, res: Result) -> None:
    from mpi4py import MPI

    rows = []
    pairwise = _is_pairwise(world, plan)
    for p in range(2, world.size + 1):
        sub = world.comm.Split(0 if world.rank < p else MPI.UNDEFINED, world.rank)
        intra = _intra_peers(world, p)
        for m in plan.a2a_sizes:
            t = _time_a2a(sub, p, m, plan.reps) if sub != MPI.COMM_NULL else 0.0
            rows.append((p, intra if m else 0.0, m, _max_over(world.comm, t)))
        if sub != MPI.COMM_NULL:
            sub.Free()
    _fit_a2a(res, rows, pairwise)


def _fit_a2a(res: Result, rows: list, pairwise: bool) -> None:
    p, intra, m, y = map(np.array, zip(*rows))
    inter = np.where(m > 0, (p - 1) - intra, 0.0)
    fit = nnls_relative({"sync": np.ceil(np.log2(p)), "peer_intra": intra, "peer_inter": inter,
                         "byte_intra": intra * m, "byte_inter": inter * m}, y)
    src = _fit_source("Alltoallv", fit)
    res.set("coll.t_sync", positive(fit.coef["sync"], FLOOR_S), src)
    res.set("coll.pairwise", float(pairwise), "calibrate: an Alltoallv with one non-empty "
            f"message per rank costs {'about as much as' if pairwise else 'less than'} a dense one")
    res.set("coll.bruck_max_bytes", 0, "Open MPI and MPICH Alltoallv have no Bruck variant "
            "(linear or pairwise exchange only)")
    for lvl in ("intra", "inter"):
        if fit.coef[f"peer_{lvl}"] is not None:
            res.set(f"coll.t_peer_{lvl}", positive(fit.coef[f"peer_{lvl}"], FLOOR_S), src)
            res.set(f"coll.bw_{lvl}", 1.0 / max(fit.coef[f"byte_{lvl}"] or 0.0, 1e-13), src)
    for key in ("coll.t_peer", "coll.bw"):
        _fill_level(res, key)
    res.quality["alltoallv"] = fit.rel_rms


def _is_pairwise(world, plan: Plan) -> bool:
    """Does an Alltoallv with one small message per rank cost about as much as a dense one?"""
    P, m = world.size, 1024
    if P < 3:
        return True
    one = _time_a2a(world.comm, P, m, plan.reps, only_next=True)
    dense = _time_a2a(world.comm, P, m, plan.reps)
    return bool(world.comm.bcast(one > 0.75 * dense if world.rank == 0 else None, root=0))


def _intra_peers(world, p: int) -> float:
    """Mean number of on-node peers of a member of the sub-communicator of ranks 0..p-1."""
    nodes = world.node_of[:p]
    return float(np.mean([np.count_nonzero(nodes == nodes[r]) - 1 for r in range(p)]))


def _time_a2a(sub, p: int, m: int, reps: int, only_next: bool = False) -> float:
    """Median Alltoallv time: `m` bytes to every rank, or (`only_next`) only to the next one."""
    from mpi4py import MPI

    send = np.full(p, m, dtype=np.int64)
    recv = send.copy()
    if only_next:
        r = sub.Get_rank()
        send[:], recv[:] = 0, 0
        send[(r + 1) % p], recv[(r - 1) % p] = m, m
    displs = np.arange(p, dtype=np.int64) * m
    sendbuf = np.zeros(max(p * m, 1), dtype=np.uint8)
    recvbuf = np.empty_like(sendbuf)

    def step():
        sub.Alltoallv([sendbuf, (send, displs), MPI.BYTE], [recvbuf, (recv, displs), MPI.BYTE])

    sub.Barrier()
    return _median_time(step, reps)


# -- 6. real backends: the per-step software intercept -----------------------------------------
def _backends(world, plan: Plan, res: Result) -> None:
    from ..backends import get_backend
    from ..store import ShardStore

    mean = 2048
    n = 64 * world.size
    store = ShardStore.from_records(world, [mean] * _block_len(n, world), _fill, n)
    rng = np.random.default_rng(7)
    try:
        for name, key in (("onesided", "os.t_step"), ("collective", "coll.t_step")):
            backend = get_backend(name)(store, world)
            excess = []
            for batch in (1, 4):
                t = _time_backend(world, backend, rng, n, batch, plan.steps)
                w = Workload(world.size, batch, mean, 0.0, int(np.bincount(world.node_of).max()))
                model = dict(get_model(name).terms(w, {**res.params, key: 0.0}))
                excess.append(t - sum(model.values()))
            backend.close()
            res.set(key, positive(float(np.median(excess)), 1e-6),
                    f"calibrate: real {name} steps at batch 1 and 4 minus the other terms")
    finally:
        store.close()


def _block_len(n: int, world) -> int:
    from ..store import block_bounds

    b = block_bounds(n, world.size)
    return int(b[world.rank + 1] - b[world.rank])


def _fill(buf: np.ndarray, offs: np.ndarray) -> None:
    buf[:] = 7


def _time_backend(world, backend, rng, n: int, batch: int, steps: int) -> float:
    times = []
    for _ in range(steps + 1):
        plan = world.comm.bcast(rng.permutation(n)[:world.size * batch].reshape(world.size, -1)
                                if world.rank == 0 else None, root=0)
        world.comm.Barrier()
        t = time.perf_counter()
        backend.fetch(plan)
        times.append(_max_over(world.comm, time.perf_counter() - t))
    return float(np.median(times[1:]))


# -- provenance --------------------------------------------------------------------------------
def _profile(world, res: Result, seconds: float) -> Profile:
    from mpi4py import MPI

    from .. import __version__

    hosts = sorted(set(world.comm.allgather(socket.gethostname())))
    prov = {"kind": "calibrated", "date": _dt.datetime.now(_dt.timezone.utc).isoformat(
                timespec="seconds"),
            "host": hosts[0] if len(hosts) == 1 else hosts, "ranks": world.size,
            "nodes": world.num_nodes, "ranks_per_node": int(np.bincount(world.node_of).max()),
            "mpi_library": MPI.Get_library_version().splitlines()[0].strip().strip("\x00"),
            "mpi4py": __import__("mpi4py").__version__, "python": platform.python_version(),
            "mdloader": __version__, "seconds": round(seconds, 1),
            "fit_rel_rms": {k: round(v, 3) for k, v in res.quality.items()}}
    name = f"calibrated-{hosts[0]}"
    return Profile(name, res.params, res.sources,
                   f"measured by mdloader calibrate on {world.size} ranks, "
                   f"{world.num_nodes} node(s)", prov)


__all__ = ["Plan", "run"]
