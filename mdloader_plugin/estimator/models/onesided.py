"""Cost of one step of the one-sided backend (``backends/onesided.py``).

The backend keeps one ``MPI_Win_allocate`` window per rank over its records and one
``Lock_all(MODE_NOCHECK)`` epoch for the loader's life. Each step it issues, for every remote
owner, ONE ``MPI_Get`` whose target datatype is an ``hindexed`` list of that owner's records
(coalesced: one Get per owner, not per sample), copies local records with memcpy, and ends with
one ``Flush_all``. Gets are issued back to back, so their network latencies overlap: the flush
pays one round trip, each Get only its issue overhead. Formula (seconds per step)::

    T = os.t_step                                 (0 on one rank: no MPI at all)
      + t_flush                                   (os.t_flush_inter if any owner is off-node,
                                                   else os.t_flush_intra; 0 on one rank)
      + n_intra os.t_get_intra                    n_* = expected distinct owners,
      + n_inter os.t_get_inter                          (P-1)(1-(1-1/P)^B) split by node
      + m (n_intra + n_inter) os.t_dtype          m = share of owners holding >= 2 records
                                                  (one record: plain Get, no datatype)
      + k os.t_block                              k = B(P-1)/P remote records (datatype blocks)
      + Bmax (f / os.bw_intra + (1-f) / os.bw_inter)   Bmax = E[max over ranks] of remote bytes,
                                                       f = (R-1)/(P-1) on-node share
      + (B/P) (mem.t_sample + mu / mem.bw)        local records, memcpy

Trade-off against the collective: cost grows with the batch (owners, blocks, bytes) but not
with the world size once ``P > B`` (a rank talks to at most ``B`` owners), so it wins at large
``P`` and small ``B``. It needs no agreement between ranks, but a target whose MPI makes no
progress can stall it (see the backend's docstring for how progress is guaranteed).
"""

from __future__ import annotations

from .workload import Workload

#: parameter name -> (kind, meaning). Kinds: "s" seconds, "B/s" bandwidth, "B" bytes.
PARAMS = {
    "os.t_step": ("s", "fixed software cost of one step (planning, bookkeeping)"),
    "os.t_flush_intra": ("s", "Flush_all when every owner is on this node (one round trip)"),
    "os.t_flush_inter": ("s", "Flush_all when an owner is on another node (one network RTT)"),
    "os.t_get_intra": ("s", "issue overhead of one Get to an on-node owner"),
    "os.t_get_inter": ("s", "issue overhead of one Get to an off-node owner"),
    "os.t_dtype": ("s", "create + commit + free one hindexed target datatype"),
    "os.t_block": ("s", "per record (datatype block) processing cost"),
    "os.bw_intra": ("B/s", "Get bandwidth from an on-node owner, per rank"),
    "os.bw_inter": ("B/s", "Get bandwidth from an off-node owner, per rank (NIC share)"),
    "mem.bw": ("B/s", "local memcpy bandwidth"),
    "mem.t_sample": ("s", "per record software cost of a local copy"),
}


def terms(w: Workload, p: dict) -> dict[str, float]:
    """Per-step seconds of each term of the formula above (their sum is the prediction)."""
    if w.world_size == 1:
        flush = 0.0
    else:
        flush = p["os.t_flush_inter"] if w.world_size > w.rpn else p["os.t_flush_intra"]
    f = w.intra_fraction
    return {
        "step": p["os.t_step"] if w.world_size > 1 else 0.0,  # one rank: a local copy only
        "flush": flush,
        "gets": w.owners_intra * p["os.t_get_intra"] + w.owners_inter * p["os.t_get_inter"],
        "datatypes": w.multi_fraction * w.owners * p["os.t_dtype"],
        "blocks": w.remote_samples * p["os.t_block"],
        "bandwidth": w.max_remote_bytes() * (f / p["os.bw_intra"] + (1 - f) / p["os.bw_inter"]),
        "local_copy": w.local_samples * (p["mem.t_sample"] + w.mean_bytes / p["mem.bw"]),
    }
