"""What a calibration collects (parameters, sources, fit quality) and the profile it becomes."""

from __future__ import annotations

import datetime as _dt
import platform
import socket
from dataclasses import dataclass, field

import numpy as np

from ... import __version__
from ..fit import POOR_FIT
from ..profile import Profile, validate_params


FLOOR_S, FLOOR_BW = 1e-8, 1e7
BW_SLACK = 1.5  # a fitted bandwidth may exceed the best throughput a point reached by this much
NODE_SHARE = 0.25  # of CalibrationSetup.budget_s for the per-node stage (beside the job's)
#: what the per-node stage measures for a job inside one node (``Profile.node``)
NODE_KEYS = ("os.t_step", "os.t_flush_intra", "os.t_get_intra", "os.t_block", "os.bw_intra",
             "coll.t_step", "coll.t_sync", "coll.t_peer_intra", "coll.bw_intra", "coll.pairwise")


@dataclass
class Result:
    """What a calibration measured: parameters with their sources, fit quality, gaps (keys
    not measured, and why), warnings and the measured rows (provenance)."""

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



# -- helpers ---------------------------------------------------------------------------------
def fit_source(name: str, fit) -> str:
    """The source line a fitted parameter carries: its fit, points and residuals."""
    held = f"; bounded: {', '.join(fit.bounded)}" if fit.bounded else ""
    return (f"calibrate: {name} fit, {fit.rows} points, relative rms error {fit.rel_rms:.0%}, "
            f"worst {fit.rel_worst:.0%}{held}")


def note_fit(res: Result, key: str, fit, what: str, why: str | None = None) -> None:
    """Record a fit's residuals; a poor one becomes a warning naming the worst point (and
    `why`, where the caller knows, else that the machine was probably busy)."""
    res.quality[key], res.worst[key] = fit.rel_rms, fit.rel_worst
    if fit.rel_rms > POOR_FIT:
        why = why or ("the machine was probably busy: re-run calibrate on an idle machine "
                      "before trusting this profile")
        res.warnings.append(f"poor {key} fit: relative rms {fit.rel_rms:.0%} (worst point "
                            f"{what} off by {fit.rel_worst:.0%}); {why}")


def bw_floor(nbytes: np.ndarray, y: np.ndarray, cap: float | None = None) -> float:
    """Lowest plausible per-byte cost: 1 / (BW_SLACK x the best throughput a point reached),
    and (intra-node) not below the memcpy cost 1 / `cap`."""
    best = float(np.max(nbytes / y)) if np.any(nbytes > 0) else 0.0
    floor = 1.0 / (BW_SLACK * best) if best > 0 else 0.0
    return max(floor, 1.0 / cap) if cap else floor



# -- provenance --------------------------------------------------------------------------------
def to_profile(world, res: Result, seconds: float, node: "Result | None" = None) -> Profile:
    """The machine profile a calibration writes: `res`'s parameters, the per-node ones of
    `node` (``node_params``) and the provenance (date, hosts, MPI library, seconds taken)."""
    from mpi4py import MPI

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


