"""Stage 5: ``Alltoallv`` on sub-communicators of 2..P ranks; per-byte slopes and latencies."""

from __future__ import annotations


import numpy as np

from ..fit import lad_relative, nnls_relative, positive
from ..timing import CalibrationSetup, median_time
from .gets import fill_level
from .result import FLOOR_S, Result, bw_floor, fit_source, note_fit


# -- 5. Alltoallv ------------------------------------------------------------------------------
def measure_alltoallv(world, setup: CalibrationSetup, res: Result) -> None:
    """Stage ``alltoallv``: time Alltoallv on sub-communicators of 2..P ranks at several message
    sizes and fit the collective model's sync, per-peer and per-byte costs into `res`."""
    from mpi4py import MPI

    rows = []
    sizes = _a2a_world_sizes(world)
    budget = setup.point_budget("alltoallv", (len(sizes) + 2) * len(setup.a2a_sizes))
    pairwise = _is_pairwise(world, setup, budget)
    clock = setup.clock("alltoallv", world.comm)
    for p in sizes:
        sub = world.comm.Split(0 if world.rank < p else MPI.UNDEFINED, world.rank)
        intra = _intra_peers(world, p)
        for i, m in enumerate(setup.a2a_sizes):
            t = clock.point(lambda: _time_a2a(sub, p, m, setup.reps, budget)
                            if sub != MPI.COMM_NULL else 0.0)
            rows.append((p, intra if m else 0.0, m, t))
            # the same on every rank (maxed); 0 B and one size always run, every size on all ranks
            if i >= 1 and (t > setup.max_step_s or (clock.over and p != sizes[-1])):
                res.skipped["alltoallv"] = (res.skipped.get("alltoallv", 0)
                                            + len(setup.a2a_sizes) - i - 1)
                break
        if sub != MPI.COMM_NULL:
            sub.Free()
    res.points["alltoallv"] = [[int(q), float(i), int(b), float(t)] for q, i, b, t in rows]
    fit_a2a(res, rows, pairwise)


def _a2a_world_sizes(world) -> list[int]:
    """Sub-communicator sizes 2..P; above 8 ranks a geometric subset (and P itself)."""
    if world.size <= 8:
        return list(range(2, world.size + 1))
    return sorted({2, 3, 4, 6, 8, world.size} | {int(x) for x in np.geomspace(8, world.size, 4)})


def fit_a2a(res: Result, rows: list, pairwise: bool) -> None:
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
        floors = {"byte_intra": bw_floor(intra * m, y, res.params.get("mem.bw")),
                  "byte_inter": bw_floor(inter * m, y)}
        fit = nnls_relative(cols, y, lower=floors)
    else:
        fit = nnls_relative(cols, y, fixed=slopes)
    src = fit_source("Alltoallv" if slopes is None else "Alltoallv (per-byte: the two largest "
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
        fill_level(res, key)
    w = fit.worst_row
    pred = sum((c or 0.0) * cols[k] for k, c in fit.coef.items())
    small = slopes is not None and pred[w] > y[w] and m[w] < m.max()
    note_fit(res, "alltoallv", fit, f"{p[w]} ranks, {m[w]} B a pair",
              "messages this small beat the large ones' rate (the links' buffers absorb them); "
              "they are priced at that rate, an upper bound" if small else None)


def _a2a_slopes(p, intra, inter, m, y, mem_bw: float | None) -> "dict[str, float] | None":
    """Per-byte costs (on-node, across nodes) from the two largest message sizes measured on
    each sub-communicator: the secant ``(t2 - t1) / (m2 - m1)`` is what one more byte a pair
    costs once the links, not their buffers, set the pace, whatever the latency. Those slopes
    (one a size p, over its ``intra`` and ``inter`` peers) are fitted by least absolute
    relative error (:func:`~mdloader_plugin.estimator.fit.lad_relative`: on 4 emulated hosts x 1
    rank at 200mbit the 3-rank exchange reached 22 MB/s a rank, the 2- and 4-rank ones 12, and 12 is
    what the backends' steps see; a least-squares fit of the three said 18); a
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


def _is_pairwise(world, setup: CalibrationSetup, budget: float) -> bool:
    """Does an Alltoallv with one small message per rank cost about as much as a dense one?"""
    P, m = world.size, 1024
    if P < 3:
        return True
    one = _time_a2a(world.comm, P, m, setup.reps, budget, only_next=True)
    dense = _time_a2a(world.comm, P, m, setup.reps, budget)
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
