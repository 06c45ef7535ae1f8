"""Micro-benchmarks that measure this machine's cost-model parameters, and the fit.

``mpiexec -n P mdloader calibrate --out PROFILE.json`` runs, on all ranks at once (so the
numbers include the contention a real step sees):

1. ``memcpy``   local record gathers (k records of m bytes)        -> mem.t_sample, mem.bw
2. ``plan``     scanning a whole-world step of P*B ids              -> coll.t_plan_id
                the Alltoallv count arrays at two world sizes       -> coll.t_count
                (``mdloader rank-cost --profile-out`` fits both from a rank's real step)
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

Time (``timing.py``): under ~60 s at any link rate. ``CalibrationSetup.budget_s`` (default 45 s) is
split
over the stages (a stage that overran leaves the later ones less: ``timing.stage_scale``);
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

import time
from dataclasses import replace
from typing import Callable

import numpy as np

from ..profile import Profile, validate_params
from ..timing import CalibrationSetup
from ...mpi.groups import Group
from .alltoallv import measure_alltoallv
from .backends import measure_backends
from .gets import measure_gets
from .local import measure_dtype, measure_memcpy, measure_plan_scan
from .result import NODE_KEYS, NODE_SHARE, Result, to_profile


def run(world, setup: CalibrationSetup | None = None,
        log: Callable[[str], None] = print) -> Profile:
    """Collective: measure, fit and return the profile (identical on every rank)."""
    setup = setup or CalibrationSetup()
    say = log if world.rank == 0 else (lambda _msg: None)
    res, t0 = Result(), time.perf_counter()
    stages = [("memcpy", measure_memcpy), ("plan", measure_plan_scan), ("dtype", measure_dtype),
              ("get", measure_gets), ("alltoallv", measure_alltoallv),
              ("backends", measure_backends)]
    for i, (name, fn) in enumerate(stages, 1):
        ts = time.perf_counter()
        # a stage that overran leaves the later ones less (rank 0's clock: the same everywhere)
        staged = setup.for_stage(name, world.comm.bcast(ts - t0, root=0))
        fn(world, staged, res)
        world.comm.Barrier()
        say(f"calibrate: [{i}/{len(stages)}] {name} done in {time.perf_counter() - ts:.1f} s"
            + (f" (its share scaled by {staged.scale:.2f}: earlier stages overran)"
               if staged.scale < 0.99 else ""))
    node = _node_stage(world, setup, res, say)
    res = world.comm.bcast(res, root=0)  # rank 0's fit is the profile, for everyone
    validate_params(res.params, "calibration result")
    for w in res.warnings:
        say(f"calibrate: WARNING {w}")
    seconds = time.perf_counter() - t0
    say(f"calibrate: {seconds:.1f} s in all (budget {setup.budget_s:.0f} s); fit residuals "
        + ", ".join(f"{k} rms {v:.0%} worst {res.worst.get(k, 0):.0%}"
                    for k, v in res.quality.items()))
    return to_profile(world, res, seconds, node)



# -- 7. inside one node --------------------------------------------------------------------------
def wants_node_stage(node_of: np.ndarray) -> bool:
    """Several nodes, and at least 2 ranks on every one (else nothing on a node to measure)."""
    counts = np.bincount(np.asarray(node_of))
    return counts.size > 1 and int(counts.min()) >= 2


def _node_world(world):
    """Collective. A World-like view of this rank's node (a
    :class:`~mdloader_plugin.mpi.groups.Group` on a communicator split by node, ranks in world
    order)."""
    me = int(world.node_of[world.rank])
    comm = world.comm.Split(color=me, key=world.rank)
    n = comm.Get_size()
    return Group(comm, comm.Get_rank(), n, np.zeros(n, dtype=np.int64), index=me,
                 count=world.num_nodes, world_size=world.size, local_rank=comm.Get_rank(),
                 local_size=n, owned=True)


def _node_stage(world, setup: CalibrationSetup, res: Result, say) -> "Result | None":
    """Collective over `world`. Stages 4-6 on every node's sub-communicator at once; rank 0's
    node's fit (None on a single node or with a node of one rank). Node-independent terms
    (memcpy, step scan, datatypes) are the whole run's."""
    if not wants_node_stage(world.node_of):
        return None
    ts = time.perf_counter()
    node = _node_world(world)
    sub = replace(setup, budget_s=setup.budget_s * NODE_SHARE, scale=1.0)
    out = Result()
    for key in ("mem.t_sample", "mem.bw", "coll.t_plan_id", "os.t_dtype"):
        out.set(key, res.params[key], res.sources[key])
    try:
        t0 = time.perf_counter()
        for name, fn in (("get", measure_gets), ("alltoallv", measure_alltoallv),
                         ("backends", measure_backends)):
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


__all__ = ["NODE_KEYS", "CalibrationSetup", "Result", "run", "wants_node_stage"]
