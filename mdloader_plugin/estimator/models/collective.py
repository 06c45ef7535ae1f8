"""Cost of one step of the collective backend (``backends/collective.py``).

Every rank derives what it must send to whom from its own block's slice of the epoch's inverse
(``O(B)``, never the ``[P, B]`` table: :mod:`mdloader_plugin.sampling.planner`), builds the count
and displacement arrays ``Alltoallv`` needs (``O(P)``: what still grows with the ranks), packs
those records, and all ranks call ONE ``MPI_Alltoallv`` (self-send included).
There is no request round, but every rank waits for the slowest. Formula (seconds per step)::

    T = coll.t_step                          (0 on one rank: a local copy, no MPI)
      + coll.t_plan_id * B + coll.t_count * P  my row and sends (B ids) and the O(P) count and
                                               displacement arrays (bincount, cumsum); fitted
                                               from `mdloader rank-cost --profile-out` (a + b P
                                               over its --ranks); a profile without
                                               coll.t_count prices P at coll.t_plan_id
      + coll.t_sync * ceil(log2 P)             agreement / skew between ranks
      + L(P)                                   per-peer latency:
            pairwise: (R-1) coll.t_peer_intra + (P-R) coll.t_peer_inter
                      (coll.pairwise = 1: every pair costs, data or not)
            linear  : n_intra coll.t_peer_intra + n_inter coll.t_peer_inter
                      (coll.pairwise = 0: only the n = (P-1)(1-(1-1/P)^B) peers with data,
                      as in MPICH's "scattered" and Open MPI's linear Alltoallv)
            Bruck   : ceil(log2 P) t_peer      when the mean message per pair is below
                                               coll.bruck_max_bytes (t_peer = inter if P > R)
      + c Bmax (f / coll.bw_intra + (1-f) / coll.bw_inter)
                                               Bmax = E[max over ranks] of bytes sent or
                                               received (irregular graph sizes -> imbalance);
                                               c = 1 pairwise, ceil(log2 P)/2 Bruck (it forwards)
      + (Smax + B/P) (mem.t_sample + mu / mem.bw)
                                               pack the Smax records I send (max over owners)
                                               and my local ones

Trade-off against one-sided: the latency term grows with ``P`` whatever the batch (every pair
is a peer, even with nothing to send), so it loses at large ``P`` and small ``B``; at large ``B``
one bulk exchange with no per-owner datatype beats many Gets. It needs no MPI progress outside
the call, so it is safe while ranks sit in other libraries' collectives.
"""

from __future__ import annotations

import math

from .workload import Workload

PARAMS = {
    "coll.t_step": ("s", "fixed software cost of one step (counts, displacements)"),
    "coll.t_plan_id": ("s", "per id cost of a rank's plan, grouping and packing (and, without "
                            "coll.t_count, per count-array entry)"),
    "coll.t_sync": ("s", "per tree stage synchronisation cost (skew between ranks)"),
    "coll.t_peer_intra": ("s", "per on-node peer cost of one Alltoallv"),
    "coll.t_peer_inter": ("s", "per off-node peer cost of one Alltoallv"),
    "coll.pairwise": ("flag", "1 if an Alltoallv costs every peer (pairwise exchange), 0 if "
                              "only peers with data (linear/scattered)"),
    "coll.bruck_max_bytes": ("B", "mean message per pair below which the MPI uses Bruck "
                                  "(0: always pairwise/linear)"),
    "coll.bw_intra": ("B/s", "Alltoallv bandwidth between ranks of a node, per rank"),
    "coll.bw_inter": ("B/s", "Alltoallv bandwidth across nodes, per rank (NIC share)"),
    "mem.bw": ("B/s", "local memcpy bandwidth"),
    "mem.t_sample": ("s", "per record software cost of a local copy"),
}


#: optional parameters: name -> (unit, meaning, the parameter whose value it takes when absent)
OPTIONAL = {
    "coll.t_count": ("s", "per rank cost of the O(P) Alltoallv count and displacement arrays",
                     "coll.t_plan_id"),
}


def uses_bruck(w: Workload, p: dict) -> bool:
    """Whether the MPI is expected to pick Bruck's algorithm for this step."""
    if w.world_size <= 2:
        return False
    per_pair = w.remote_bytes / (w.world_size - 1)
    return per_pair < p["coll.bruck_max_bytes"]


def terms(w: Workload, p: dict) -> dict[str, float]:
    """Per-step seconds of each term of the formula above (their sum is the prediction)."""
    P, R = w.world_size, w.rpn
    stages = math.ceil(math.log2(P)) if P > 1 else 0
    if uses_bruck(w, p):
        t_peer = p["coll.t_peer_inter"] if P > R else p["coll.t_peer_intra"]
        latency, forward = stages * t_peer, max(1.0, stages / 2)
    elif p["coll.pairwise"] >= 0.5:
        latency = (R - 1) * p["coll.t_peer_intra"] + (P - R) * p["coll.t_peer_inter"]
        forward = 1.0
    else:
        latency = w.owners_intra * p["coll.t_peer_intra"] + w.owners_inter * p["coll.t_peer_inter"]
        forward = 1.0
    f = w.intra_fraction
    per_record = p["mem.t_sample"] + w.mean_bytes / p["mem.bw"]
    return {
        "step": p["coll.t_step"] if P > 1 else 0.0,  # one rank: a local copy only
        "plan": p["coll.t_plan_id"] * w.batch_size
        + p.get("coll.t_count", p["coll.t_plan_id"]) * P,  # a raw dict may lack it
        "sync": p["coll.t_sync"] * stages,
        "latency": latency,
        "bandwidth": forward * w.max_remote_bytes()
        * (f / p["coll.bw_intra"] + (1 - f) / p["coll.bw_inter"]),
        "pack": (w.max_remote_samples() + w.local_samples) * per_record,
    }
