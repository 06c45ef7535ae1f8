"""Micro-benchmarks that measure this machine's cost-model parameters, and the fit.

``mpiexec -n P mdloader calibrate --out PROFILE.json`` runs, on all ranks at once (so the
numbers include the contention a real step sees):

1. ``memcpy``   local record gathers (k records of m bytes)        -> mem.t_sample, mem.bw
2. ``plan``     scanning a global plan of P*B ids                   -> coll.t_plan_id
3. ``dtype``    create + commit + free of hindexed datatypes         -> os.t_dtype
4. ``get``      Gets from n owners, b blocks of m bytes, one Flush   -> os.t_flush_*, os.t_get_*,
                (owners on this node, then on other nodes)              os.t_block, os.bw_*
5. ``alltoallv`` on sub-communicators of 2..P ranks by bytes        -> coll.t_sync, coll.t_peer_*,
                (bandwidth from the two largest sizes of each, up to    coll.bw_*
                4 MiB a pair; latencies from the rest)
6. ``backends`` a few real steps of each backend at small batches    -> os.t_step, coll.t_step
                (what the micro-benchmarks miss: the backends' own Python work per step)
7. ``node``     across several nodes with >= 2 ranks on every node: stages 4-6 again on a
                per-node sub-communicator (all nodes at once)        -> the profile's
                ``node_params`` (:data:`NODE_KEYS`), what a job or replica group inside one
                node sees: its window is the node's (shared memory), its Alltoallv has only
                on-node peers. The whole-job series cannot identify these (measured: on 2 hosts
                x 2 ranks every Alltoallv has one peer on the node and two across, so the fit's
                split of the per-peer cost between them is arbitrary, and the intra Gets ran on a
                window spanning the network). Its budget is ``NODE_SHARE`` of the run's.

Time (``timing.py``): under ~60 s at any link rate. ``Plan.budget_s`` (default 45 s) is split over the stages
(a stage that overran leaves the later ones less: ``timing.stage_scale``);
a point's repetitions are as many as its share of the budget allows (at least 2, at most
``reps``, from the warm-up's time, max over ranks so every rank runs the same count); a
series stops growing its messages once one point's step takes more than ``max_step_s``; once a
stage has spent its share, only the points its fit cannot do without still run (each owner
count or world size at one small message, the largest one at every size). A slow link (100mbit)
took 252 s in the Get stage before these caps.

Fits: each series is fitted by non-negative least squares on relative error (``fit.py``), with
bandwidths bounded: at most ``BW_SLACK`` x the highest throughput any point of the series reached
(intra-node also at most the memcpy bandwidth); a bound that binds is named in the source. Each
fit's relative rms and worst point go into the profile's provenance; a fit over
``fit.POOR_FIT`` is a warning line at calibration. Intra- and
inter-node parameters come from separate series (owners picked by ``World.node_of``), so a run
across nodes (or hosts of ``mdloader cluster``) prices an on-node owner apart from an off-node one.
A level without a pair (all ranks on one node: no inter; one rank a node: no intra) gets the
other level's values and a source that says so. With one owner count only (2 ranks a node: one
on-node peer) a Get's issue cost cannot be told from the flush: the flush takes it all and
``t_get`` comes from the other level, capped at this level's flush. Quick mode (tests) uses
fewer sizes and repetitions and a 20 s budget.
"""

from __future__ import annotations

import datetime as _dt
import platform
import socket
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from .fit import POOR_FIT, lad_relative, nnls_relative, positive
from .models import Workload, get_model
from .profile import Profile, validate_params
from .timing import SHARES, Plan, StageClock, max_array, max_over, median_time

FLOOR_S, FLOOR_BW = 1e-8, 1e7
BW_SLACK = 1.5  # a fitted bandwidth may exceed the best throughput a point reached by this much
NODE_SHARE = 0.25  # of Plan.budget_s for the per-node stage (on top of the whole-job stages)
#: what the per-node stage measures for a job inside one node (``Profile.node``)
NODE_KEYS = ("os.t_step", "os.t_flush_intra", "os.t_get_intra", "os.t_block", "os.bw_intra",
             "coll.t_step", "coll.t_sync", "coll.t_peer_intra", "coll.bw_intra", "coll.pairwise")


@dataclass
class Result:
    params: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    quality: dict[str, float] = field(default_factory=dict)
    gaps: dict[str, str] = field(default_factory=dict)  # key -> why it was not measured
    worst: dict[str, float] = field(default_factory=dict)  # fit -> worst relative residual
    warnings: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # stage -> points not run (budget)
    points: dict[str, list] = field(default_factory=dict)  # fit -> its measured rows (provenance)

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
        # a stage that overran leaves the later ones less (rank 0's clock: the same everywhere)
        staged = plan.for_stage(name, world.comm.bcast(ts - t0, root=0))
        fn(world, staged, res)
        world.comm.Barrier()
        say(f"calibrate: [{i}/{len(stages)}] {name} done in {time.perf_counter() - ts:.1f} s"
            + (f" (its share scaled by {staged.scale:.2f}: earlier stages overran)"
               if staged.scale < 0.99 else ""))
    node = _node_stage(world, plan, res, say)
    res = world.comm.bcast(res, root=0)  # rank 0's fit is the profile, for everyone
    validate_params(res.params, "calibration result")
    for w in res.warnings:
        say(f"calibrate: WARNING {w}")
    seconds = time.perf_counter() - t0
    say(f"calibrate: {seconds:.1f} s in all (budget {plan.budget_s:.0f} s); fit residuals "
        + ", ".join(f"{k} rms {v:.0%} worst {res.worst.get(k, 0):.0%}"
                    for k, v in res.quality.items()))
    return _profile(world, res, seconds, node)


# -- 7. inside one node --------------------------------------------------------------------------
def wants_node_stage(node_of: np.ndarray) -> bool:
    """Several nodes, and at least 2 ranks on every one (else nothing on a node to measure)."""
    counts = np.bincount(np.asarray(node_of))
    return counts.size > 1 and int(counts.min()) >= 2


def _node_world(world):
    """Collective. A World-like view of this rank's node (a :class:`~..groups.Group` on a
    communicator split by node, ranks in world order)."""
    from ..mpi.groups import Group

    me = int(world.node_of[world.rank])
    comm = world.comm.Split(color=me, key=world.rank)
    n = comm.Get_size()
    return Group(comm, comm.Get_rank(), n, np.zeros(n, dtype=np.int64), index=me,
                 count=world.num_nodes, world_size=world.size, local_rank=comm.Get_rank(),
                 local_size=n, owned=True)


def _node_stage(world, plan: Plan, res: Result, say) -> "Result | None":
    """Collective over `world`. Stages 4-6 on every node's sub-communicator at once; rank 0's
    node's fit (None on a single node or with a node of one rank). Node-independent terms
    (memcpy, plan scan, datatypes) are the whole run's."""
    if not wants_node_stage(world.node_of):
        return None
    ts = time.perf_counter()
    node = _node_world(world)
    sub = replace(plan, budget_s=plan.budget_s * NODE_SHARE, scale=1.0)
    out = Result()
    for key in ("mem.t_sample", "mem.bw", "coll.t_plan_id", "os.t_dtype"):
        out.set(key, res.params[key], res.sources[key])
    try:
        t0 = time.perf_counter()
        for name, fn in (("get", _gets), ("alltoallv", _alltoallv), ("backends", _backends)):
            fn(node, sub.for_stage(name, node.comm.bcast(time.perf_counter() - t0, root=0)), out)
            node.comm.Barrier()
    finally:
        node.close()
    world.comm.Barrier()
    where = f"node sub-communicator of {node.size} ranks"
    for key in NODE_KEYS:
        out.sources[key] = f"{where}: {out.sources[key]}"
    if node.size < 3:  # _is_pairwise needs 3 ranks to tell; the whole run's flag stands
        out.params.pop("coll.pairwise")
    res.quality.update({f"node_{k}": v for k, v in out.quality.items()})
    res.worst.update({f"node_{k}": v for k, v in out.worst.items()})
    res.warnings.extend(f"node: {w}" for w in out.warnings)
    res.skipped.update({f"node_{k}": v for k, v in out.skipped.items()})
    res.points.update({f"node_{k}": v for k, v in out.points.items()})
    say(f"calibrate: [node] Gets, Alltoallv and backend steps on each node's {node.size} ranks "
        f"done in {time.perf_counter() - ts:.1f} s")
    return out


# -- helpers ---------------------------------------------------------------------------------
def _fit_source(name: str, fit) -> str:
    held = f"; bounded: {', '.join(fit.bounded)}" if fit.bounded else ""
    return (f"calibrate: {name} fit, {fit.rows} points, relative rms error {fit.rel_rms:.0%}, "
            f"worst {fit.rel_worst:.0%}{held}")


def _note_fit(res: Result, key: str, fit, what: str, why: str | None = None) -> None:
    """Record a fit's residuals; a poor one becomes a warning naming the worst point (and
    `why`, where the caller knows, else that the machine was probably busy)."""
    res.quality[key], res.worst[key] = fit.rel_rms, fit.rel_worst
    if fit.rel_rms > POOR_FIT:
        why = why or ("the machine was probably busy: re-run calibrate on an idle machine "
                      "before trusting this profile")
        res.warnings.append(f"poor {key} fit: relative rms {fit.rel_rms:.0%} (worst point "
                            f"{what} off by {fit.rel_worst:.0%}); {why}")


def _bw_floor(nbytes: np.ndarray, y: np.ndarray, cap: float | None = None) -> float:
    """Lowest plausible per-byte cost: 1 / (BW_SLACK x the best throughput a point reached),
    and (intra-node) not below the memcpy cost 1 / `cap`."""
    best = float(np.max(nbytes / y)) if np.any(nbytes > 0) else 0.0
    floor = 1.0 / (BW_SLACK * best) if best > 0 else 0.0
    return max(floor, 1.0 / cap) if cap else floor


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
            t = median_time(lambda: gather_local(buf, src, nb, out, dst), plan.reps,
                             budget=plan.point_budget("memcpy", 3 * len(plan.sizes)))
            rows.append((k, k * m, t))
    k, b, y = map(np.array, zip(*rows))
    y = max_array(world.comm, y)
    fit = nnls_relative({"t_sample": k, "per_byte": b}, y, lower={"per_byte": _bw_floor(b, y)})
    res.set("mem.t_sample", positive(fit.coef["t_sample"], FLOOR_S), _fit_source("memcpy", fit))
    res.set("mem.bw", 1.0 / max(fit.coef["per_byte"] or 0.0, 1e-13), _fit_source("memcpy", fit))
    _note_fit(res, "memcpy", fit, f"{k[fit.worst_row]} records of {b[fit.worst_row] // max(k[fit.worst_row], 1)} B")


# -- 2. plan scan (collective backend) -------------------------------------------------------
def _plan_scan(world, plan: Plan, res: Result) -> None:
    n = 200_000
    ids = np.random.default_rng(1).permutation(n).reshape(-1, 1000)
    lo, hi = n // 4, n // 2

    def scan():
        flat = ids.reshape(-1)
        mask = (flat >= lo) & (flat < hi)
        np.repeat(np.arange(ids.shape[0]), ids.shape[1])[mask]

    t = max_over(world.comm, median_time(scan, plan.reps, budget=plan.point_budget("plan", 1)))
    res.set("coll.t_plan_id", positive(t / n, 1e-10),
            f"calibrate: scan of a {n}-id global plan, {t * 1e3:.2f} ms")


# -- 3. datatypes ----------------------------------------------------------------------------
def _dtype(world, plan: Plan, res: Result) -> None:
    from mpi4py import MPI

    nb = [1000] * 16
    displs = list(range(0, 16 * 4096, 4096))

    def make():
        MPI.BYTE.Create_hindexed(nb, displs).Commit().Free()

    t = max_over(world.comm, median_time(make, plan.reps * 4,
                                           budget=plan.point_budget("dtype", 1)))
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
        levels = [(lvl, same, _n_common(world, same)) for lvl, same in
                  (("intra", True), ("inter", False))]
        counts = {lvl: _owner_counts(n) for lvl, _, n in levels}
        points = sum(len(c) for c in counts.values()) * len(plan.sizes) * len(plan.blocks)
        budget, clock = plan.point_budget("get", points), plan.clock("get", world.comm)
        for level, same, n_max in levels:
            rows = _get_series(world, plan, win, _peers(world, same)[:n_max], counts[level],
                               win_bytes, MPI, budget, res, clock)
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


def _owner_counts(n_peers: int) -> list[int]:
    return sorted({1, n_peers} | ({2} if n_peers > 2 else set())) if n_peers else []


def _get_series(world, plan: Plan, win, peers: list[int], counts: list[int], win_bytes: int,
                MPI, budget: float, res: Result, clock: StageClock) -> list:
    """Timed Get steps, the points the fit cannot do without first (:func:`_get_points`); the
    others only while the stage is within its time. A (owners, blocks) series stops growing its
    records once a step takes longer than ``plan.max_step_s``. Every rank skips the same points
    (times are maxed over ranks)."""
    rows, too_slow = [], set()
    out = np.empty(win_bytes, dtype=np.uint8)
    for n, b, m, essential in _get_points(counts, plan):
        if (n, b) in too_slow or (not essential and clock.over):
            res.skipped["get"] = res.skipped.get("get", 0) + 1
            continue

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
        t = clock.point(lambda: median_time(step, plan.reps, world.comm, budget))
        rows.append((n, n * b, n * b * m, n * (b > 1), t))
        if t > plan.max_step_s:
            too_slow.add((n, b))
    return rows


def _get_points(counts: list[int], plan: Plan) -> list[tuple[int, int, int, bool]]:
    """(owners, blocks, record bytes, essential), smallest records first in each series. The
    essential points identify every term: each owner count at one small Get, the most owners at
    every record size, and at the most blocks."""
    if not counts:
        return []
    top, small = counts[-1], plan.sizes[0]
    must = ([(n, 1, small) for n in counts] + [(top, 1, m) for m in plan.sizes[1:]]
            + [(top, plan.blocks[-1], small)])
    rest = [(n, b, m) for n in counts for b in plan.blocks for m in plan.sizes
            if (n, b, m) not in must]
    return [(*p, True) for p in dict.fromkeys(must)] + [(*p, False) for p in rest]


def _fit_gets(world, res: Result, level: str, rows: list) -> None:
    if not rows:
        return
    n, blocks, nbytes, ndt, y = map(np.array, zip(*rows))
    y = np.maximum(y - ndt * res.params["os.t_dtype"], 1e-7)  # datatype cost measured apart
    cols = {"flush": np.ones_like(y), "get": n, "block": blocks, "per_byte": nbytes}
    if np.unique(n).size < 2:  # one owner count: "get" is a copy of "flush", not identifiable
        del cols["get"]
    cap = res.params["mem.bw"] if level == "intra" else None
    fit = nnls_relative(cols, y, lower={"per_byte": _bw_floor(nbytes, y, cap)})
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
    w = fit.worst_row
    _note_fit(res, f"get_{level}", fit, f"{n[w]} owner(s), {blocks[w]} records, {nbytes[w]} B")


# -- 5. Alltoallv ------------------------------------------------------------------------------
def _alltoallv(world, plan: Plan, res: Result) -> None:
    from mpi4py import MPI

    rows = []
    sizes = _a2a_world_sizes(world)
    budget = plan.point_budget("alltoallv", (len(sizes) + 2) * len(plan.a2a_sizes))
    pairwise = _is_pairwise(world, plan, budget)
    clock = plan.clock("alltoallv", world.comm)
    for p in sizes:
        sub = world.comm.Split(0 if world.rank < p else MPI.UNDEFINED, world.rank)
        intra = _intra_peers(world, p)
        for i, m in enumerate(plan.a2a_sizes):
            t = clock.point(lambda: _time_a2a(sub, p, m, plan.reps, budget)
                            if sub != MPI.COMM_NULL else 0.0)
            rows.append((p, intra if m else 0.0, m, t))
            # the same on every rank (maxed); 0 B and one size always run, every size on all ranks
            if i >= 1 and (t > plan.max_step_s or (clock.over and p != sizes[-1])):
                res.skipped["alltoallv"] = (res.skipped.get("alltoallv", 0)
                                            + len(plan.a2a_sizes) - i - 1)
                break
        if sub != MPI.COMM_NULL:
            sub.Free()
    res.points["alltoallv"] = [[int(q), float(i), int(b), float(t)] for q, i, b, t in rows]
    _fit_a2a(res, rows, pairwise)


def _a2a_world_sizes(world) -> list[int]:
    """Sub-communicator sizes 2..P; above 8 ranks a geometric subset (and P itself)."""
    if world.size <= 8:
        return list(range(2, world.size + 1))
    return sorted({2, 3, 4, 6, 8, world.size} | {int(x) for x in np.geomspace(8, world.size, 4)})


def _fit_a2a(res: Result, rows: list, pairwise: bool) -> None:
    """Per-byte costs from the largest messages (:func:`_a2a_slopes`), then the sync and
    per-peer costs on what is left of every point. One relative-error fit of all five terms
    over all sizes let the small messages, which ride the links' buffers faster than the link
    (4 KB at 2x a 200mbit link's rate), price the bytes: 33-50 MB/s on a 25 MB/s link whose
    large Alltoallvs reached 11-23 MB/s, and multi-MB collective steps predicted 4x too fast
    (measured on 4 hosts x 1 rank)."""
    p, intra, m, y = map(np.array, zip(*rows))
    inter = np.where(m > 0, (p - 1) - intra, 0.0)
    cols = {"sync": np.ceil(np.log2(p)), "peer_intra": intra, "peer_inter": inter,
            "byte_intra": intra * m, "byte_inter": inter * m}
    slopes = _a2a_slopes(p, intra, inter, m, y, res.params.get("mem.bw"))
    if slopes is None:  # no size measured twice large: one fit of everything, bounded
        floors = {"byte_intra": _bw_floor(intra * m, y, res.params.get("mem.bw")),
                  "byte_inter": _bw_floor(inter * m, y)}
        fit = nnls_relative(cols, y, lower=floors)
    else:
        fit = nnls_relative(cols, y, fixed=slopes)
    src = _fit_source("Alltoallv" if slopes is None else "Alltoallv (per-byte: the two largest "
                      "messages of each size; the rest on latency)", fit)
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
    w = fit.worst_row
    pred = sum((c or 0.0) * cols[k] for k, c in fit.coef.items())
    small = slopes is not None and pred[w] > y[w] and m[w] < m.max()
    _note_fit(res, "alltoallv", fit, f"{p[w]} ranks, {m[w]} B a pair",
              "messages this small beat the large ones' rate (the links' buffers absorb them); "
              "they are priced at that rate, an upper bound" if small else None)


def _a2a_slopes(p, intra, inter, m, y, mem_bw: float | None) -> "dict[str, float] | None":
    """Per-byte costs (on-node, across nodes) from the two largest message sizes measured on
    each sub-communicator: the secant ``(t2 - t1) / (m2 - m1)`` is what one more byte a pair
    costs once the links, not their buffers, set the pace, whatever the latency. Those slopes
    (one a size p, over its ``intra`` and ``inter`` peers) are fitted by least absolute
    relative error (:func:`~.fit.lad_relative`: on 4 emulated hosts x 1 rank at 200mbit the
    3-rank exchange reached 22 MB/s a rank, the 2- and 4-rank ones 12, and 12 is what the
    backends' steps see; a least-squares fit of the three said 18); a
    level no row has comes back None (filled from the other by the caller). None when no size
    has two messages measured."""
    slope_rows = []
    for q in np.unique(p):
        sel = np.flatnonzero((p == q) & (m > 0))
        if sel.size < 2:
            continue
        a, b = sel[np.argsort(m[sel])[-2:]]
        dy = (y[b] - y[a]) / (m[b] - m[a])
        if dy > 0:
            slope_rows.append((intra[b], inter[b], dy))
    if not slope_rows:
        return None
    n_in, n_out, s = map(np.array, zip(*slope_rows))
    fit = lad_relative({"byte_intra": n_in, "byte_inter": n_out}, s,
                        lower={"byte_intra": 1.0 / mem_bw} if mem_bw else None)
    if all(v is None for v in fit.coef.values()):
        return None
    return {k: v for k, v in fit.coef.items() if v is not None}


def _is_pairwise(world, plan: Plan, budget: float) -> bool:
    """Does an Alltoallv with one small message per rank cost about as much as a dense one?"""
    P, m = world.size, 1024
    if P < 3:
        return True
    one = _time_a2a(world.comm, P, m, plan.reps, budget, only_next=True)
    dense = _time_a2a(world.comm, P, m, plan.reps, budget)
    return bool(world.comm.bcast(one > 0.75 * dense if world.rank == 0 else None, root=0))


def _intra_peers(world, p: int) -> float:
    """Mean number of on-node peers of a member of the sub-communicator of ranks 0..p-1."""
    nodes = world.node_of[:p]
    return float(np.mean([np.count_nonzero(nodes == nodes[r]) - 1 for r in range(p)]))


def _time_a2a(sub, p: int, m: int, reps: int, budget: float, only_next: bool = False) -> float:
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
    return median_time(step, reps, sub, budget)


# -- 6. real backends: the per-step software intercept -----------------------------------------
def _backends(world, plan: Plan, res: Result) -> None:
    from ..backends import get_backend
    from ..store.shard import ShardStore

    mean = 2048
    n = 64 * world.size
    store = ShardStore.from_records(world, [mean] * _block_len(n, world), _fill, n)
    rng = np.random.default_rng(7)
    try:
        for name, key in (("onesided", "os.t_step"), ("collective", "coll.t_step")):
            backend = get_backend(name)(store, world)
            excess = []
            for batch in (1, 4):
                clock = StageClock(world.comm, plan.budget_s * SHARES["backends"] * plan.scale / 4)
                t = _time_backend(world, backend, rng, n, batch, plan.steps, clock)
                w = Workload(world.size, batch, mean, 0.0, int(np.bincount(world.node_of).max()))
                model = dict(get_model(name).terms(w, {**res.params, key: 0.0}))
                excess.append(t - sum(model.values()))
            backend.close()
            res.set(key, positive(float(np.median(excess)), 1e-6),
                    f"calibrate: real {name} steps at batch 1 and 4 minus the other terms")
    finally:
        store.close()


def _block_len(n: int, world) -> int:
    from ..store.shard import block_bounds

    b = block_bounds(n, world.size)
    return int(b[world.rank + 1] - b[world.rank])


def _fill(buf: np.ndarray, offs: np.ndarray) -> None:
    buf[:] = 7


def _time_backend(world, backend, rng, n: int, batch: int, steps: int,
                  clock: StageClock) -> float:
    """Median step (max over ranks) of up to `steps` after a warm-up; at least 2, fewer than
    `steps` once `clock` is over its time."""
    times = []

    def one() -> float:
        plan = world.comm.bcast(rng.permutation(n)[:world.size * batch].reshape(world.size, -1)
                                if world.rank == 0 else None, root=0)
        world.comm.Barrier()
        t = time.perf_counter()
        backend.fetch(plan)
        return time.perf_counter() - t

    for i in range(steps + 1):
        times.append(clock.point(one))
        if i >= 2 and clock.over:
            break
    return float(np.median(times[1:]))


# -- provenance --------------------------------------------------------------------------------
def _profile(world, res: Result, seconds: float, node: "Result | None" = None) -> Profile:
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
            "fit_rel_rms": {k: round(v, 3) for k, v in res.quality.items()},
            "fit_worst_rel": {k: round(v, 3) for k, v in res.worst.items()},
            "warnings": list(res.warnings), "points_skipped_for_time": dict(res.skipped),
            # the Alltoallv series as measured ([ranks, on-node peers, bytes a pair, seconds]),
            # so a fit can be checked or redone without the cluster
            "points": dict(res.points)}
    name = f"calibrated-{hosts[0]}"
    node = world.comm.bcast(node, root=0)
    keys = [k for k in NODE_KEYS if node is not None and k in node.params]
    if keys:
        validate_params({**res.params, **{k: node.params[k] for k in keys}}, "node calibration")
        prov["node_ranks"] = int(np.bincount(world.node_of).min())
    return Profile(name, res.params, res.sources,
                   f"measured by mdloader calibrate on {world.size} ranks, "
                   f"{world.num_nodes} node(s)", prov,
                   node={k: node.params[k] for k in keys},
                   node_sources={k: node.sources[k] for k in keys})


__all__ = ["Plan", "run"]
