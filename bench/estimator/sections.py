"""The sections of ``bench/RESULTS.md`` about the backend estimator (accuracy on one host and
across emulated hosts, the choice on varied clusters), per-rank cost and scale on paper."""

from __future__ import annotations

from bench.estimator import choice_report
from bench.estimator import rank_cost_figures
from bench.loaders import tables as t
from bench.reporting import Other, Section

def _estimator(d: dict) -> list[str]:
    est = d["estimator_accuracy.json"]
    s = est["summary"]
    m, o = s["model"], s["online"]
    return [f"{s['configs']} configurations ({'quick' if est.get('quick') else 'full'} grid, "
            f"{est.get('steps', '?')} steps a backend): the model alone picked the faster backend "
            f"in {m['right_pick_fraction']:.1%}, regret geo-mean {m['regret_geomean']:.1%}, worst "
            f"{m['regret_worst']:.0%}; with the online trial (re-scored on the same "
            f"measurements) {o['right_pick_fraction']:.0%}, regret geo-mean "
            f"{o['regret_geomean']:.1%}, worst {o['regret_worst']:.0%}.", "",
            "Figures: `bench/estimator_pred_vs_meas.png`, "
            "`bench/estimator_crossover_perlmutter.png` (model output)."]

def _estimator_cluster(d: dict) -> list[str]:
    est = d["estimator_cluster.json"]
    out = [f"{est['hosts']} emulated hosts, batch {est['batches']} a rank, {est['steps']} "
           "measured steps a configuration; auto's pick at start (model) and after its online "
           "check, against the backend measured faster.", "",
           "| link | configs | model right | model regret geo / worst | online right | "
           "online regret geo / worst |", "|---|---:|---:|---:|---:|---:|"]
    for rate, s in est["summary"].items():
        m, o = s["model"], s["online"]
        out.append(f"| {rate} | {s['configs']} | {m['right_pick_fraction']:.0%} | "
                   f"{m['regret_geomean']:+.1%} / {m['regret_worst']:+.0%} | "
                   f"{o['right_pick_fraction']:.0%} | {o['regret_geomean']:+.1%} / "
                   f"{o['regret_worst']:+.0%} |")
    return out + ["", "Figure: `bench/estimator_cluster.png`."]

def _backend_choice(d: dict) -> list[str]:
    return choice_report.results_section(d["backend_choice.json"]) + [
        "", "Figure: `bench/backend_choice.png`."]

def _scale(d: dict) -> list[str]:
    return t.scale_table(d["scale_perlmutter.json"]) + [
        "", "Figure: `bench/scale_perlmutter.png` (labelled MODEL OUTPUT)."]

def _rank_cost(d: dict) -> list[str]:
    """CPU a step of one rank against P (today's code and the code before), the targets, and
    the 2-8 rank A/B."""
    res, small = d["rank_cost.json"], d.get("rank_cost_small.json")
    out = [f"{res['meta']['machine']}; thread CPU ms a step, median of {res['meta']['steps']} "
           f"steps, fastest of {res['meta'].get('rounds', 1)} rounds, b = 32, N = 1e8 "
           "(`legacy`: the whole [P, b] table a step).", "",
           "| backend | weights | data sets | code | " +
           " | ".join(f"P={p}" for p in (64, 512, 2048, 8192)) + " |",
           "|---|---|---:|---|" + "---:|" * 4]
    keys = []
    for r in res["rows"]:
        k = (r["backend"], r["weights"], r["datasets"], r["code"])
        if k not in keys:
            keys.append(k)
    for k in keys:
        by = {r["ranks"]: r["step_cpu_ms_median"] for r in res["rows"]
              if (r["backend"], r["weights"], r["datasets"], r["code"]) == k}
        out.append(f"| {k[0]} | {'atoms' if k[1] else '-'} | {k[2]} | {k[3]} | " +
                   " | ".join(f"{by.get(p, float('nan')):.2f}" for p in (64, 512, 2048, 8192))
                   + " |")
    out += ["", "Targets:", ""]
    for name, v in res["targets"].items():
        out.append(f"* {name}: " + ", ".join(f"{a} {b:.3g}" if isinstance(b, float) else
                                             f"{a} {b}" for a, b in v.items()))
    if "balance" in res:
        out += ["", "Balance: max over mean of the per-rank atoms a step (N = 1e6, 5 steps):", "",
                *rank_cost_figures.balance().strip().splitlines()]
    if "heldout" in res:
        out += ["", "Held out: weighted steps at other batch sizes and N:", "",
                *rank_cost_figures.heldout().strip().splitlines()]
    if small:
        out += ["", "2-8 ranks, new / legacy ms a step (fastest of 7 interleaved rounds; the "
                "ratio: median of the rounds' ratios):", ""]
        for r in small["rows"]:
            out.append(f"* {r['backend']}, weights={r['weights']}, {r['datasets']} data set(s), "
                       f"P={r['ranks']}: {r['new_ms']:.2f} / {r['legacy_ms']:.2f} "
                       f"({r['new_over_legacy']:.2f})")
    return out

ACCURACY = Section(
    "Backend choice on one host (estimator accuracy)",
    ("python -m bench.estimator.accuracy",),
    ("bench/estimator/accuracy.py", "bench/estimator/plots.py"),
    ("estimator_accuracy.json",), _estimator,
    ("bench/estimator_pred_vs_meas.png", "bench/estimator_crossover_perlmutter.png"))
CLUSTER = Section(
    "Backend choice across 2 emulated hosts (estimator accuracy)",
    ("python -m bench.estimator.cluster",), ("bench/estimator/cluster.py",),
    ("estimator_cluster.json",), _estimator_cluster, ("bench/estimator_cluster.png",),
    make_bench="BENCH_CLUSTER=1")
CHOICE = Section(
    "Backend choice on varied clusters (tune half and held-out half)",
    ("for c in 2x1@100mbit 2x2@1gbit 4x1@300mbit 3x1@500mbit 3x2@300mbit 2x3@100mbit; do "
     "python -m bench.estimator.backend_choice --shapes $c --batches 1,16,256,512 --rounds 6 "
     "--max-rounds 16 --seq-budget 150 --config-budget 60 --append; done",),
    ("bench/estimator/backend_choice.py", "bench/estimator/choice_worker.py", "bench/ties.py"),
    ("backend_choice.json",), _backend_choice, ("bench/backend_choice.png",),
    make_bench="BENCH_CLUSTER=1")
SCALE_MODEL = Section(
    "Scale on paper (model output)", ("python -m bench.estimator.scale_model",),
    ("bench/estimator/scale_model.py",), ("scale_perlmutter.json",), _scale,
    ("bench/scale_perlmutter.png",))
RANK_COST = Section(
    "Per-rank cost against the number of ranks (mdloader rank-cost, one process)",
    ("python -m bench.estimator.rank_cost", "python -m bench.estimator.rank_cost --small-only"),
    ("bench/estimator/rank_cost.py",), ("rank_cost.json", "rank_cost_small.json"), _rank_cost,
    ("bench/rank_cost.png",))

OTHERS = [
    Other("backend_choice_auto_real.log", ("python -m bench.estimator.backend_choice --shapes "
                                           "3x1@500mbit --auto-real ...",),
          ("bench/estimator/backend_choice.py",), ("docs/choosing-a-backend.md",)),
    Other("profile-*.json", ("mdloader calibrate (on each emulated cluster, by "
                             "bench/groups/cluster.py, bench/estimator/backend_choice.py, "
                             "bench/estimator/cluster.py)",),
          ("bench/groups/cluster.py", "bench/estimator/backend_choice.py"),
          ("the auto runs of the sections above (their inputs)",)),
]
