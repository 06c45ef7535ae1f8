"""Per-rank cost against the number of ranks: `mdloader rank-cost` over a grid, today's code and
the code before per-rank plans (``legacy``: the whole ``[P, b]`` table a step), in one process.

Targets (docs/scale.md): CPU a step at P = 8,192 within 1.25x of P = 64 (b = 32, N = 10^8; both
backends; with and without weights; 1 and 4 data sets); epoch start <= 0.5 s at N = 10^9 and
P = 8,192; <= 4 B a sample of N-proportional state at N = 10^9 with 15 data sets. Also the
balance weights reach: max over mean of the per-rank atoms of a step, balance blocks (the
default) and whole windows against the whole-world balance. Held out (``heldout``, reported
apart): weighted steps at batch sizes and N the work was not developed on (b = 8 and 128).

Writes bench/results/rank_cost.json and bench/rank_cost.png. Thread CPU time, median of
``--steps`` steps a run; the grid is run ``--rounds`` times (9): a point is its fastest round
(a shared machine's load only adds: one run's median can be 2x another's at the same point) and
a ratio (8,192 over 64 ranks) the median over rounds of the same round's ratio; every round is
kept in ``rounds_ms``. The JSON says when and where it ran.

    python -m bench.estimator.rank_cost [--quick] [--steps 200]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from mdloader_plugin.estimator.rankcost import Job, RankCost
from mdloader_plugin.sampling.balance import balance_plan, deal_blocks
from bench.estimator.rank_cost_figures import TARGET, paired_ratio
from bench.harness import ROOT, record
from mdloader_plugin.sampling.reference import world_step

RANKS = [64, 512, 2048, 8192]


def grid(quick: bool):
    n = 10 ** 8
    for backend in ("onesided", "collective"):
        for weights in (None, "atoms"):
            for datasets in (1, 4):
                if quick and weights and datasets == 4:
                    continue
                yield dict(num_samples=n, backend=backend, weights=weights, datasets=datasets)


def balance_rows(p: int, n: int, steps: int = 5) -> dict:
    """max/mean of per-rank atoms a step: unbalanced, blocks (the default: windows of 16 ranks,
    4 columns a block), whole windows (16 ranks, all columns), the whole world."""
    rc = RankCost(Job(p, n, 32, "onesided", weights="atoms", steps=1))
    core, w = rc.schedule, rc.schedule.weights
    out = {"unbalanced": [], "blocks": [], "windows": [], "world": []}
    for s in range(steps):
        raw = core.raw_rows(1, s, np.arange(p))
        for k, t in (("unbalanced", raw), ("blocks", world_step(core, 1, s)),
                     ("windows", deal_blocks(raw, w, core.balance_window, raw.shape[1])),
                     ("world", balance_plan(raw, w))):
            per = w[t].astype(np.int64).sum(axis=1)
            out[k].append(float(per.max() / per.mean()))
    return {"ranks": p, "window": core.balance_window, "columns": core.balance_columns,
            **{k: float(np.mean(v)) for k, v in out.items()}}


def small_ab(rounds: int = 7, steps: int = 200) -> list:
    """2-8 ranks, today's code against the code before (legacy), interleaved A B A B: each
    side's fastest round (median step CPU), and new over legacy as the median of the rounds'
    ratios (each round runs both back to back)."""
    out = []
    for backend in ("onesided", "collective"):
        for weights in (None, "atoms"):
            for datasets in (1, 4):
                for p in (2, 4, 8):
                    meds: dict = {"new": [], "legacy": []}
                    for _ in range(rounds):
                        for legacy in (False, True):
                            job = Job(p, 10 ** 5, 32, backend, datasets=datasets,
                                      weights=weights, steps=steps, legacy=legacy)
                            r = RankCost(job).run()
                            meds[r["code"]].append(r["step_cpu_ms_median"])
                    row = {"ranks": p, "backend": backend, "weights": weights is not None,
                           "datasets": datasets, "num_samples": 10 ** 5, "batch_size": 32,
                           **{f"{k}_ms": float(min(v)) for k, v in meds.items()},
                           "rounds": meds}
                    row["new_over_legacy"] = float(np.median(  # paired by round
                        np.array(meds["new"]) / np.array(meds["legacy"])))
                    out.append(row)
                    print(json.dumps({k: row[k] for k in ("ranks", "backend", "weights",
                                                          "datasets", "new_over_legacy")}),
                          flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=9,
                    help="rounds over the whole grid; a point is its fastest round")
    ap.add_argument("--small-only", action="store_true",
                    help="only the 2-8 rank A/B (bench/results/rank_cost_small.json)")
    ap.add_argument("--out", default=str(ROOT / "bench/results/rank_cost.json"))
    a = ap.parse_args()
    if a.small_only:
        t0 = time.time()
        rows = small_ab()
        Path(a.out).with_name("rank_cost_small.json").write_text(json.dumps(
            {"meta": {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0)),
                      "machine": machine(), "clock": "time.thread_time"}, "rows": rows,
             "record": record(a)},
            indent=1))
        return 0
    t_start = time.time()
    jobs = [Job(p, batch_size=32, steps=a.steps, legacy=legacy, **cfg)
            for cfg in grid(a.quick) for p in RANKS for legacy in (False, True)
            if not (legacy and p == 8192 and cfg["datasets"] == 4 and a.quick)]
    rows = rounds_of(jobs, a.rounds)
    big = []
    for ds in (1, 15):  # N = 1e9: epoch start (collective: order + inverse) and state a sample
        job = Job(8192, 10 ** 9, 32, "collective", datasets=ds, steps=10)
        rc = RankCost(job)
        row = rc.run()
        row["structures"] = rc.structures()
        big.append(row)
        print(json.dumps({k: row[k] for k in ("ranks", "datasets", "num_samples",
                                              "epoch_start_s", "bytes_per_sample",
                                              "step_cpu_ms_median")}), flush=True)
    balance = [balance_rows(p, 10 ** 6) for p in (64, 512)]
    print(json.dumps(balance), flush=True)
    # shapes the work was not developed on: other batch sizes and N
    heldout = rounds_of([Job(p, n, b, backend, weights="atoms", steps=a.steps)
                         for b, n in ((8, 10 ** 7), (128, 3 * 10 ** 8))
                         for backend in ("onesided", "collective") for p in (64, 8192)],
                        a.rounds)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t_start)),
            "machine": machine(),
            "batch_size": 32, "steps": a.steps, "rounds": a.rounds,
            "clock": "time.thread_time"}
    out = {"meta": meta, "record": record(a), "rows": rows, "big": big, "balance": balance,
        "heldout": heldout,
           "targets": targets(rows, big)}
    Path(a.out).write_text(json.dumps(out, indent=1))
    plot(rows, ROOT / "bench/rank_cost.png", meta)
    print(json.dumps(out["targets"], indent=1))
    return 0


def rounds_of(jobs: list, rounds: int) -> list:
    """Each job run `rounds` times, the whole list once a round (a load that comes and goes
    falls on every point alike); a point's row is its fastest round by median step CPU, with
    every round's median in ``rounds_ms`` (ratios pair them: :func:`paired_ratio`)."""
    runs: list[list] = [[] for _ in jobs]
    for _ in range(rounds):
        for job, out in zip(jobs, runs):
            out.append(RankCost(job).run())
            r = out[-1]
            print(json.dumps({k: r[k] for k in ("ranks", "backend", "weights", "datasets",
                                                "batch_size", "code", "step_cpu_ms_median")}),
                  flush=True)
    rows = []
    for out in runs:
        row = dict(min(out, key=lambda r: r["step_cpu_ms_median"]))
        row["rounds_ms"] = [r["step_cpu_ms_median"] for r in out]  # in round order
        rows.append(row)
    return rows


def machine() -> str:
    return (f"{platform.node()}, {os.cpu_count()} cores, "
            f"{platform.processor() or platform.machine()}, load average "
            f"{os.getloadavg()[0]:.1f} at start (shared with other jobs)")


def targets(rows, big) -> dict:
    res = {}
    new = [r for r in rows if r["code"] == "new"]
    for r in new:
        if r["ranks"] != 8192:
            continue
        key = (r["backend"], r["weights"], r["datasets"])
        base = next(x for x in new if x["ranks"] == 64 and
                    (x["backend"], x["weights"], x["datasets"]) == key)
        ratio = paired_ratio(r, base)
        res[f"{r['backend']} weights={r['weights']} datasets={r['datasets']}"] = {
            "p64_ms": base["step_cpu_ms_median"], "p8192_ms": r["step_cpu_ms_median"],
            "ratio": ratio, "met": ratio <= TARGET}
    for b in big:
        res[f"N=1e9 P=8192 datasets={b['datasets']}"] = {
            "epoch_start_s": b["epoch_start_s"], "epoch_start_met": b["epoch_start_s"] <= 0.5,
            "bytes_per_sample": b["bytes_per_sample"],
            "bytes_met": b["bytes_per_sample"] <= 4.0}
    return res


def plot(rows, path, meta) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, backend in zip(axes, ("onesided", "collective")):
        for (weights, datasets), style in (((False, 1), "o"), ((True, 1), "s"),
                                           ((False, 4), "^"), ((True, 4), "d")):
            for code, ls in (("new", "-"), ("legacy", "--")):
                pts = sorted((r["ranks"], r["step_cpu_ms_median"]) for r in rows
                             if r["backend"] == backend and r["weights"] == weights
                             and r["datasets"] == datasets and r["code"] == code)
                if pts:
                    x, y = zip(*pts)
                    ax.plot(x, y, ls, marker=style, label=f"{code}, weights={weights}, "
                                                          f"{datasets} data set(s)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("ranks P")
        ax.set_title(f"{backend}: CPU a step, one rank (b=32, N=1e8)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("thread CPU ms a step (median)")
    axes[1].legend(fontsize=7)
    fig.suptitle(f"mdloader rank-cost, {meta['date']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
