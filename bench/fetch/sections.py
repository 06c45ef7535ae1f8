"""The sections of ``bench/RESULTS.md`` about the fixed per-step fetch cost, several data sets in
one store and progress under MPICH, and the results of this topic pages quote."""

from __future__ import annotations

from bench.fetch.figures import async_progress_lines
from bench.loaders import tables as t
from bench.reporting import Other, Section

def _fetch_cost(d: dict) -> list[str]:
    return ["Before: the tree at b5124e3; after: the kept code (14c71fe); owners of a small step "
            "from the index's vectorised lookup; batch 128 added.", ""] + t.fetch_cost_tables(
        d["fetch_cost_before.json"], d["fetch_cost.json"],
        (d["fetch_profile_n2.json"], d["fetch_profile_n4.json"]),
        before_what="the tree before this round, b5124e3")

def _multi(d: dict) -> list[str]:
    m = d["multi.json"]
    out = [f"{m['ranks']} ranks, batch {m['batch']} a rank, files of {m['sizes']} graphs in one "
           f"store against one file of {sum(m['sizes'])}; {m['steps']} steps x {m['rounds']} "
           "interleaved rounds, fetch median of the slowest rank (target: within 10%).", "",
           "| backend | 3 files ms | 1 file ms | ratio |", "|---|---:|---:|---:|"]
    for b, r in m["backends"].items():
        out.append(f"| {b} | {r['median_ms']['multi']:.3f} | {r['median_ms']['single']:.3f} | "
                   f"{r['ratio']:.3f} |")
    return out

FIXED_COST = Section(
    "Fixed per-step cost: fetch against the real DDStore and the memcpy floor",
    ("python -m bench.loaders.compare --loaders onesided,auto,ddstore-real --batches "
     "4,32,128,256 --steps 12 --repeats 2 --pss-every 3 "
     "--out bench/results/fetch_cost{_before,}.json",
     "mpiexec -n {2,4} python -m mpi4py -m bench.fetch.profile --between collate "
     "--steps 15 --batches 32,128,256 --out bench/results/fetch_profile_n{2,4}.json"),
    ("bench/loaders/compare.py", "bench/fetch/profile.py"),
    ("fetch_cost.json", "fetch_cost_before.json", "fetch_profile_n2.json",
     "fetch_profile_n4.json"), _fetch_cost, make_bench="no")
MULTI = Section(
    "Several data sets in one store",
    ("mpiexec -n 4 python -m mpi4py -m bench.fetch.multi --steps 15 --rounds 3",),
    ("bench/fetch/multi.py",), ("multi.json",), _multi, make_bench="no")
ASYNC_PROGRESS = Section(
    "Progress across hosts under MPICH: MDLoader's poller and MPICH_ASYNC_PROGRESS",
    ("python -m bench.fetch.async_progress --rounds 2",),
    ("bench/fetch/async_progress.py",), ("async_progress.json",),
    lambda d: async_progress_lines(d["async_progress.json"]), make_bench="no")

OTHERS = [
    Other("coll_progress.json", ("python -m bench.fetch.coll_progress",),
          ("bench/fetch/coll_progress.py",), ("docs/how-it-works.md",)),
    Other("fetch_trees_ab.json", ("cd TREE && PYTHONPATH=TREE:REPO mpiexec -n 2 python -m mpi4py "
                                  "-m bench.fetch.trees_ab OUT",),
          ("bench/fetch/trees_ab.py",), ("docs/gpu-feeding.md",)),
]
