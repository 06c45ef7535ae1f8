"""The sections of ``bench/RESULTS.md`` about loaders side by side, across hosts, and training
(``bench/sections.py`` puts every topic's sections in order)."""

from __future__ import annotations

from bench.loaders import tables as t
from bench.reporting import Section

CLUSTERS = ("loaders_cluster.json", "loaders_cluster_200mbit.json")

def _targets(d: dict) -> list[str]:
    return t.targets(d["loaders.json"], d["training.json"],
                     [d[n] for n in CLUSTERS if d.get(n)])

def _loaders(d: dict) -> list[str]:
    res = d["loaders.json"]
    m = res["machine"]
    lines = [f"{'Full' if res['full'] else 'Reduced'} grid on `{m['host']}` ({m['cpu']}, "
             f"{m['cores']} cores shared with other jobs; load average {m['loadavg_start'][0]} "
             f"at start, {m['loadavg_end'][0]} at end), Python {m['python']}, Open MPI 5 wheel; "
             f"{res['steps']} measured steps x {res.get('repeats', 1)} interleaved rounds for "
             "the store-based loaders, 1 round for the others; the same plans and seed for every "
             "loader except PyG local."
             + (t._merged_note(m["merged_with"]) if m.get("merged_with") else ""), ""]
    lines += t.loader_tables(res)
    same = {r["loader"]: r["same_batches"] for r in res["rows"] if r["same_batches"] is not None}
    bad = sorted(k for k, v in same.items() if not v)
    return lines + ["", "Same graphs at every step as MDLoader collective: "
                    + ("all plan-driven loaders" if not bad else f"NOT for {', '.join(bad)}"),
                    "", "Figures: `bench/loaders_hydragnn.png`, `bench/loaders_oc20.png`, "
                    "`bench/loaders_memory.png`."]

def _clusters(d: dict) -> list[str]:
    out: list[str] = []
    for n in CLUSTERS:
        if d.get(n):
            out += t.cluster_table(d[n]) + [""]
    return out[:-1]

def _training(d: dict) -> list[str]:
    return t.training_table(d["training.json"]) + ["", "Figure: `bench/training.png`."]

_COMPARE = "python -m bench.loaders.compare --ranks 2,4,8 --steps 12 --repeats 3"

TARGETS = Section(
    "Targets", ("make bench", "BENCH_CLUSTER=1 make bench"),
    ("bench/loaders/compare.py", "bench/loaders/training.py", "bench/loaders/tables.py"),
    ("loaders.json", "training.json") + CLUSTERS, _targets)
SIDE_BY_SIDE = Section(
    "Loaders side by side, one host", (_COMPARE,),
    ("bench/loaders/compare.py", "bench/loaders/baselines.py", "bench/ddstore/real.py"),
    ("loaders.json",), _loaders,
    ("bench/loaders_hydragnn.png", "bench/loaders_oc20.png", "bench/loaders_memory.png"))
WHY_MISSED = Section(
    "Why targets are missed (read with the numbers above)", (_COMPARE,),
    ("bench/loaders/tables.py",), ("loaders.json",), lambda d: list(t.NOTES))
ACROSS_HOSTS = Section(
    "Across hosts (emulated cluster)",
    ("python -m bench.loaders.compare --cluster 2x2@1gbit --steps 16 --repeats 3 "
     "--out bench/results/loaders_cluster.json",
     "python -m bench.loaders.compare --cluster 2x2@200mbit --steps 16 --repeats 3 --profile "
     "bench/results/profile-cluster-200mbit.json "
     "--out bench/results/loaders_cluster_200mbit.json"),
    ("bench/loaders/compare.py",), CLUSTERS, _clusters, make_bench="BENCH_CLUSTER=1")
TRAINING = Section(
    "Training (HydraGNN)", ("python -m bench.loaders.training",),
    ("bench/loaders/training.py",), ("training.json",), _training, ("bench/training.png",))
