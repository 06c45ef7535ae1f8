"""Choosing a backend at start, from the cost model.

:func:`choose_initial` evaluates every cost model for the job (world size, ranks per node, the
samples a rank really gets per step, the data set's record sizes, a machine profile) and picks
the cheapest. The job's own measured steps then decide (``online.py``: :class:`OnlineTrial`).
Each decision yields one log line (``MDLOADER-BACKEND ...``) with the backend, predicted and
measured per-step times and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .models import Workload, predict_all
from .profile import Profile, get_profile


@dataclass(frozen=True)
class Decision:
    """A backend choice with the per-step predictions it rests on."""

    backend: str
    predicted_s: dict[str, float]
    reason: str
    measured_s: dict[str, float] = field(default_factory=dict)
    switched: bool = False

    def log_line(self) -> str:
        """The one line that records this decision."""
        return (f"MDLOADER-BACKEND backend={self.backend} "
                f"switched={'yes' if self.switched else 'no'}"
                f" predicted_s={_fmt(self.predicted_s)} measured_s={_fmt(self.measured_s)}"
                f' reason="{self.reason}"')


def _fmt(times: dict[str, float]) -> str:
    return ",".join(f"{k}:{v:.3e}" for k, v in sorted(times.items())) or "-"


def node_params(prof: Profile, world_size: int, ranks_per_node: int) -> dict[str, float]:
    """`prof`'s parameters for a job (or replica group) of `world_size` ranks inside one node.

    A calibration across several hosts with more than one rank a host also measures the
    same-host stages on a per-node sub-communicator (``calibrate.py``: Gets on a window of the
    node's ranks, Alltoallv and real backend steps among them), stored as the profile's
    ``node_params``: a group inside a node (``1 < world_size <= ranks_per_node``) uses those.

    Without them (profiles written before): a profile calibrated across nodes with ``R`` ranks a
    node and ``P`` ranks in all (pairwise Alltoallv) measured only ``(R-1) t_peer_intra +
    (P-R) t_peer_inter``: every calibration step had the same mix of node and network peers, so
    the fit's split between the two is arbitrary (measured: the 2x2 1gbit fit put all of it
    across, intra 6 us; the 200mbit one all on the node). A group inside a node sees only the
    intra term; it is taken at its upper bound, the whole measured per-peer cost on the node, so
    an unidentified term cannot rate the collective hundreds of times cheaper than it measured
    (nor make the online trial skip its probe)."""
    p = dict(prof.params)
    if not 1 < world_size <= ranks_per_node:
        return p
    if prof.node:
        p.update(prof.node)
        return p
    shape = cross_node_shape(prof)
    if shape is not None and shape[2] > shape[1] and p.get("coll.pairwise", 0) >= 0.5:
        _, rc, pc = shape
        measured = (rc - 1) * p["coll.t_peer_intra"] + (pc - rc) * p["coll.t_peer_inter"]
        p["coll.t_peer_intra"] = measured / (rc - 1)
    return p


def cross_node_shape(prof: Profile) -> "tuple[int, int, int] | None":
    """(nodes, ranks a node, ranks) of a profile calibrated on several nodes with several ranks
    on each (its provenance), else None: the calibrations whose same-host terms were measured
    together with the network unless the profile also has ``node_params``."""
    prov = prof.provenance or {}
    try:
        nodes, rc = int(prov.get("nodes") or 1), int(prov.get("ranks_per_node") or 1)
        pc = int(prov.get("ranks") or nodes * rc)
    except (TypeError, ValueError):
        return None
    if prov.get("kind") == "calibrated" and nodes >= 2 and rc >= 2:
        return nodes, rc, pc
    return None


def choose(workload: Workload, profile: "Profile | str | None" = None) -> Decision:
    """The backend with the smallest predicted step time for `workload` (a job inside one node
    with :func:`node_params`)."""
    prof = get_profile(profile)
    pred = predict_all(workload, node_params(prof, workload.world_size, workload.rpn))
    best = min(sorted(pred), key=pred.__getitem__)
    other = min((k for k in pred if k != best), key=pred.__getitem__, default=best)
    ratio = pred[other] / pred[best] if pred[best] > 0 else float("inf")
    reason = (f"model ({prof.name}): {best} predicted {ratio:.2f}x faster than {other} "
              f"for P={workload.world_size} B={workload.batch_size} "
              f"mean record {workload.mean_bytes:.0f} B")
    return Decision(best, pred, reason)


def choose_initial(world_size: int, ranks_per_node: int, batch_size: int,
                   sample_sizes: np.ndarray, profile: "Profile | str | None" = None) -> Decision:
    """Runtime hook for ``backend="auto"``: the model's choice for this job at start."""
    w = Workload.from_sizes(int(world_size), int(batch_size), sample_sizes, int(ranks_per_node))
    return choose(w, profile)
