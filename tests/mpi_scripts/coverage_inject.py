"""mdloader check's exactly-once count (check.coverage) on real ranks, with injected faults.

Usage: coverage_inject.py

The count is routed by id block (no rank holds N counts), so it must still find one duplicated,
missing, dropped or out-of-range id served by any one rank, name the same id on every rank, and
pass the true epochs (feistel and torch orders, drop_last and padding). Rank 0 prints "ok"."""

import types

import numpy as np
from mpi4py import MPI

from mdloader_plugin.loader.verify import coverage
from mdloader_plugin.sampling.schedule import Schedule
from checks import check

comm = MPI.COMM_WORLD
world = types.SimpleNamespace(size=comm.size, comm=comm, rank=comm.rank)
N, B = 1003, 8


def run(core, change=None, who=1):
    served = core.rank_indices(0, comm.rank).copy()
    if change is not None and comm.rank == who:
        served = change(served)
    got = coverage(world, core, 0, comm.rank, served)
    text = comm.allgather(None if got is None else (got.sample, got.what))
    check(len(set(text)) == 1, f"ranks disagree: {text}")  # one verdict, on every rank
    return text[0]


def first_of(core, rank):
    return int(core.rank_indices(0, rank)[0])


for order in ("feistel", "torch"):
    drop = Schedule(N, comm.size, B, drop_last=True, seed=5, order=order)
    pad = Schedule(N, comm.size, B, drop_last=False, seed=5, order=order)
    check(run(drop) is None and run(pad) is None, order)

    # duplicate: rank 1 serves rank 0's first id instead of its own
    dup = first_of(drop, 0)
    got = run(drop, lambda s: np.concatenate([[dup], s[1:]]))
    check(got == (dup, "served 2 times with drop_last"), got)

    # missing: rank 2's first id replaced by rank 0's (a padding repeat hides nothing here)
    lost = first_of(pad, 2)
    got = run(pad, lambda s: np.concatenate([[first_of(pad, 0)], s[1:]]), who=2)
    check(got == (lost, "never served in the epoch"), got)

    # dropped: one id fewer in all -> the total is wrong
    got = run(pad, lambda s: s[1:])
    check(got == (-1, f"{pad.total_size - 1} samples served, expected {pad.total_size}"), got)

    # out of range
    got = run(drop, lambda s: np.concatenate([s[:-1], [N]]))
    check(got == (N, f"served id outside 0..{N - 1}"), got)

if comm.rank == 0:
    print("ok", flush=True)
