"""The sections of ``bench/RESULTS.md`` about replica groups, on the emulated cluster and on
paper."""

from __future__ import annotations

from typing import Callable

from bench.groups import score as groups_bench
from bench.groups import model as groups_model
from bench.reporting import Section

def _groups(name: str) -> Callable[[dict], list[str]]:
    def body(d: dict) -> list[str]:
        g = d[name]
        out = ["Every group size W x backend in interleaved rounds (more rounds for the "
               "contenders while the score is unresolved), then `group_size: auto` with "
               "`backend: auto` as users run it, for epochs until its online trial has decided "
               f"(its step median: the last epoch's). {g['note']}.", ""]
        for run in g["runs"]:
            out += [groups_bench.table(run) if "rounds" in run else run["table"], ""]
        if g["runs"]:
            out += [groups_bench.summary_text(groups_bench.summary(g["runs"])) + "."]
        return out
    return body

def _loading(d: dict) -> list[str]:
    g = d["groups_loading.json"]
    return ["OC20-like slabs, W = 2 (two groups), load time of the store (slowest rank; median "
            "over interleaved rounds, a job's first load left out as warm-up). "
            f"{g['note']}.", "", groups_bench.loading_table(g["runs"])]

_GRID = "--kinds hydragnn,oc20 --batches 4,32,256"

DEVELOPED = Section(
    "Replica groups across hosts: the grid the estimator was developed on",
    (f"python -m bench.groups.cluster --rates 200mbit,1gbit --shapes 2x2,4x1 {_GRID}",),
    ("bench/groups/cluster.py", "bench/ties.py"), ("groups.json",),
    _groups("groups.json"), make_bench="BENCH_CLUSTER=1")
HELD_OUT = Section(
    "Replica groups across hosts: held out (shapes and rates the estimator was not "
    "developed on)",
    (f"python -m bench.groups.cluster --rates 300mbit,500mbit --shapes 3x2,4x1 {_GRID} "
     "--out groups_heldout.json",),
    ("bench/groups/cluster.py", "bench/ties.py"), ("groups_heldout.json",),
    _groups("groups_heldout.json"), make_bench="no")
LOADING = Section(
    "Replica groups: read once and copy, or every group reads",
    ("python -m bench.groups.cluster --loading",), ("bench/groups/cluster.py",),
    ("groups_loading.json",), _loading, make_bench="no")
MODEL = Section(
    "Replica groups on paper: Perlmutter and Frontier, 64-2048 ranks (model output)",
    ("python -m bench.groups.model",), ("bench/groups/model.py",),
    ("groups_model.json",), lambda d: groups_model.table(d["groups_model.json"]))
