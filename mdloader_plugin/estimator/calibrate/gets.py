"""Stage 4: one-sided Gets from n owners, on this node and on other nodes."""

from __future__ import annotations


import numpy as np

from ..fit import nnls_relative, positive
from ..timing import CalibrationSetup, StageClock, median_time
from ...backends.onesided import start_progress_thread
from .result import FLOOR_S, Result, bw_floor, fit_source, note_fit


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


def measure_gets(world, setup: CalibrationSetup, res: Result) -> None:
    """Stage ``gets``: timed one-sided Get steps (owners x blocks x record sizes) inside and
    across nodes, fitted into the one-sided model's per-Get, per-block and per-byte costs."""
    from mpi4py import MPI

    win_bytes = max(setup.sizes) * max(setup.blocks) * 2
    win = MPI.Win.Allocate(win_bytes, disp_unit=1, comm=world.comm)
    win.Lock_all(MPI.MODE_NOCHECK)
    # Gets are timed under the progress the one-sided backend will run with (across nodes its
    # own progress thread, which also shortens a flush)
    progress = start_progress_thread(world)
    try:
        levels = [(lvl, same, _n_common(world, same)) for lvl, same in
                  (("intra", True), ("inter", False))]
        counts = {lvl: _owner_counts(n) for lvl, _, n in levels}
        points = sum(len(c) for c in counts.values()) * len(setup.sizes) * len(setup.blocks)
        budget, clock = setup.point_budget("get", points), setup.clock("get", world.comm)
        for level, same, n_max in levels:
            rows = _get_series(world, setup, win, _peers(world, same)[:n_max], counts[level],
                               win_bytes, MPI, budget, res, clock)
            _fit_gets(world, res, level, rows)
    finally:
        if progress is not None:
            progress.close()
        win.Unlock_all()
        win.Free()
    for key in ("os.t_flush", "os.t_get", "os.bw"):
        fill_level(res, key)
    for level in ("intra", "inter"):  # an issue cost not told apart is at most the whole flush
        if f"os.t_get_{level}" in res.gaps:
            key = f"os.t_get_{level}"
            res.set(key, min(res.params[key], res.params[f"os.t_flush_{level}"]),
                    f"{res.sources[key]}; at most os.t_flush_{level}")


LEVEL_GAP = {"intra": "one rank a node, no on-node pair",
             "inter": "all ranks on one node, no inter-node pair"}


def fill_level(res: Result, key: str) -> None:
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


def _get_series(world, setup: CalibrationSetup, win, peers: list[int], counts: list[int],
                win_bytes: int, MPI, budget: float, res: Result, clock: StageClock) -> list:
    """Timed Get steps, the points the fit cannot do without first (:func:`_get_points`); the
    others only while the stage is within its time. A (owners, blocks) series stops growing its
    records once a step takes longer than ``setup.max_step_s``. Every rank skips the same points
    (times are maxed over ranks)."""
    rows, too_slow = [], set()
    out = np.empty(win_bytes, dtype=np.uint8)
    for n, b, m, essential in _get_points(counts, setup):
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
        t = clock.point(lambda: median_time(step, setup.reps, world.comm, budget))
        rows.append((n, n * b, n * b * m, n * (b > 1), t))
        if t > setup.max_step_s:
            too_slow.add((n, b))
    return rows


def _get_points(counts: list[int], setup: CalibrationSetup) -> list[tuple[int, int, int, bool]]:
    """(owners, blocks, record bytes, essential), smallest records first in each series. The
    essential points identify every term: each owner count at one small Get, the most owners at
    every record size, and at the most blocks."""
    if not counts:
        return []
    top, small = counts[-1], setup.sizes[0]
    must = ([(n, 1, small) for n in counts] + [(top, 1, m) for m in setup.sizes[1:]]
            + [(top, setup.blocks[-1], small)])
    rest = [(n, b, m) for n in counts for b in setup.blocks for m in setup.sizes
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
    fit = nnls_relative(cols, y, lower={"per_byte": bw_floor(nbytes, y, cap)})
    src = fit_source(f"Get ({level}-node owners)", fit)
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
    note_fit(res, f"get_{level}", fit, f"{n[w]} owner(s), {blocks[w]} records, {nbytes[w]} B")
