"""Does `backend: auto` hold on topologies it was never tuned on? (issue 15; ``BENCH_CLUSTER=1``)

A varied grid on the emulated cluster (``mdloader cluster``: real Open MPI over rate-limited TCP
between network namespaces): cluster shapes (hosts x ranks a host) x link rates, per cluster
``mdloader calibrate`` for its own profile, then per data set (molecules, OC20-like slabs) and
batch both backends run for real, interleaved rounds in one job, as **step time to a ready
batch** (``choice_worker.py``: ``next()`` with ``prefetch=0``, slowest rank; each backend in the
state it runs in: its own loader, its own progress thread, nothing of the other alive).

Scoring, per configuration and profile (the cluster's own and the shipped ``local``): the
model's pick (``choose_initial`` with the samples a rank really gets); the online decision's
pick, by replaying the measured step series through the real ``estimator.online.OnlineTrial``
(steps fed in the order the check asks for them, each backend's series cycled), so the decision
logic is scored on measured distributions, stalls included. Two scores: the *strict* one (the
faster median wins, however close) and the *tie-aware* one (:func:`resolve`: a stratified
Mann-Whitney test over the interleaved rounds at ``ALPHA``; a configuration whose two series do
not differ is a tie, either pick right; where they differ the pick must be the faster).
``--auto-real`` also runs a real ``backend="auto"`` loader per configuration and reports its pick
beside the replay.

Halves: clusters (shape x rate) alternate between a *tune* and a *held-out* half. The online
check's ``margin``, ``close`` and ``alpha`` (its rank test) are chosen on the tune half only
(right picks, then regret; ``OnlineTrial``'s defaults where they score as well as the best); the
held-out half is scored once with them and reported separately. Targets (held-out): the
faster backend or one within 3% in >= 98%, regret <= 2% geo-mean and <= 10% worst, and the
online decision never makes a right model pick more than 3% slower.

Full grid (``--full``): 7 shapes (2x1, 3x1, 4x1, 2x2, 2x3, 3x2, 4x2) x 3 rates (100mbit,
300mbit, 1gbit) x batch {1, 4, 16, 64, 256, 512} x both data sets = 252 configurations, a
quiet machine and a few hours. The default is a reduced slice (``--shapes``, ``--batches``).
Writes ``bench/results/backend_choice.json`` and ``bench/backend_choice.png``.

    python -m bench.estimator.backend_choice [--full] [--shapes 4x1@300mbit,2x3@100mbit,...]
                                   [--batches 1,16,256] [--rounds 3] [--max-rounds 12]
                                   [--steps 5] [--auto-real]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from bench.ties import ALPHA, WITHIN, resolve, strata  # noqa: F401  (strata, resolve: tested here)

from bench.harness import BENCH, RESULTS, ROOT, record
FULL_SHAPES = ["2x1", "3x1", "4x1", "2x2", "2x3", "3x2", "4x2"]
FULL_RATES = ["100mbit", "300mbit", "1gbit"]
FULL_BATCHES = [1, 4, 16, 64, 256, 512]
ARMS = [{"label": "onesided", "backend": "onesided"},
        {"label": "collective", "backend": "collective"}]
TUNE_GRID = {"margin": (0.02, 0.05, 0.08), "close": (0.10, 0.15, 0.20), "alpha": (None, 0.05)}


# -- measuring ---------------------------------------------------------------------------------
def measure_cluster(spec: str, args, profile_dir: Path) -> list[dict]:
    """Calibrate one cluster and measure its configurations; rows carry the shape and rate."""
    from bench.fetch.coll_progress import parse_shape, run_worker
    from mdloader_plugin.devtools.cluster import Cluster

    hosts, rph, rate = parse_shape(spec)
    prof = profile_dir / f"profile-{hosts}x{rph}-{rate}.json"
    with Cluster.up(hosts=hosts, ranks_per_host=rph, rate=rate,
                    name=f"bc{os.getpid() % 10000}") as cl:
        t0 = time.perf_counter()
        res = cl.run([sys.executable, "-m", "mpi4py", "-m", "mdloader_plugin", "calibrate",
                      "--out", str(prof)], timeout=600, capture_output=True, text=True, cwd=ROOT)
        if res.returncode:
            raise SystemExit(f"calibrate failed on {cl.describe()}:\n{res.stderr[-2000:]}")
        cal_s = time.perf_counter() - t0
        print(f"== {spec}: calibrated in {cal_s:.0f} s", flush=True)
        job = {"out": str(RESULTS / f".choice-{os.getpid()}.json"), "dists": args.dists,
               "batches": args.batches, "rounds": args.rounds, "steps": args.steps,
               "arms": ARMS, "config_budget_s": args.config_budget,
               "max_rounds": args.max_rounds, "seq_budget_s": args.seq_budget,
               "auto": [str(prof), "local"] if args.auto_real else [],
               "auto_steps": args.auto_steps}
        rows = run_worker(cl, job, timeout=args.cluster_timeout, keep_partial=True)
    return [{**r, "shape": f"{hosts}x{rph}", "rate": rate, "cluster": spec,
             "profile": str(prof.relative_to(ROOT)), "calibrate_s": round(cal_s, 1),
             "rounds": args.rounds, "max_rounds": args.max_rounds, "steps": args.steps}
            for r in rows]


# -- scoring -----------------------------------------------------------------------------------
def model_pick(row: dict, profile) -> dict:
    from mdloader_plugin.estimator import choose_initial

    sizes = np.array([row["mean_bytes"] - row["std_bytes"], row["mean_bytes"] + row["std_bytes"]])
    d = choose_initial(row["ranks"], row["ranks_per_host"], row["batch"], sizes, profile)
    return {"backend": d.backend, "predicted_s": d.predicted_s, "decision": d}


def replay(decision, steps_s: dict, profile, hosts: int, **params) -> str:
    """The online decision fed the measured series (cycled) in the order it asks for them."""
    from mdloader_plugin.estimator.online import OnlineTrial, blind_to_network

    skip = {"skip_ratio": float("inf")} if blind_to_network(profile, hosts) else {}
    check = OnlineTrial(decision, **skip, **params)
    cursor = dict.fromkeys(steps_s, 0)
    for _ in range(2000):
        if check.done:
            break
        b = check.backend_for_next_step()
        series = steps_s[b]
        check.record(series[cursor[b] % len(series)])
        cursor[b] += 1
    return check.result.backend


def score(rows: list[dict], params: dict) -> list[dict]:
    """Per row and profile: measured times, best, model pick, online (replayed) pick."""
    from mdloader_plugin.estimator import get_profile

    out, profiles = [], {}
    for r in rows:
        meas = {k: float(np.median(v)) for k, v in r["steps_s"].items() if v}
        mean = {k: float(np.mean(v)) for k, v in r["steps_s"].items() if v}
        if len(meas) < 2:
            continue
        best = min(meas, key=meas.get)
        test = resolve(strata(r))
        for label, path in (("own", r["profile"]), ("local", "local")):
            prof = profiles.setdefault(path, get_profile(str(ROOT / path) if label == "own"
                                                         else path))
            m = model_pick(r, prof)
            online = replay(m["decision"], r["steps_s"], prof, r["hosts"], **params)
            c = {k: r[k] for k in ("cluster", "shape", "rate", "dist", "batch", "ranks")}
            c.update(profile=label, measured_s=meas, best=best, model=m["backend"],
                     online=online, predicted_s=m["predicted_s"], mean_s=mean,
                     best_mean=min(mean, key=mean.get), p_value=test["p"],
                     resolved_best=test["winner"], strata=test["strata"],
                     load_avg=r.get("load_avg"), utc=r.get("utc"))
            real = _auto_real(r, path if label == "own" else "local")
            if real:
                c["auto_real"], c["auto_real_decided"] = real["final"], real["online_done"]
            out.append(c)
    return out


def _auto_real(row: dict, profile: str) -> dict | None:
    """The real auto loader's result for `profile` (the worker keys it by the path it was given,
    absolute; the row's ``profile`` is relative to the repository)."""
    for key, res in row.get("auto", {}).items():
        if key == profile or Path(key).name == Path(profile).name:
            return res
    return None


def summarise(configs: list[dict], metric: str = "median") -> dict:
    """Right picks and regret against the faster backend by `metric`: ``median`` step (issue
    15's measure) or ``mean`` step (all steps, stalls included: what a trainer pays)."""
    if not configs:
        return {"configs": 0}
    key, best = ("measured_s", "best") if metric == "median" else ("mean_s", "best_mean")

    def ratio(c, pick):
        return c[key][c[pick]] / c[key][c[best]]

    s = {"configs": len(configs)}
    for pick in ("model", "online") + (("auto_real",) if all("auto_real" in c for c in configs)
                                       else ()):
        r = np.array([ratio(c, pick) for c in configs])
        s[pick] = {"right_fraction": float(np.mean(r <= 1 + WITHIN)),
                   "regret_geomean": float(np.exp(np.mean(np.log(r))) - 1),
                   "regret_worst": float(r.max() - 1)}
    harmed = [c for c in configs if ratio(c, "model") <= 1 + WITHIN
              and c[key][c["online"]] > (1 + WITHIN) * c[key][c["model"]]]
    s["online_made_right_model_pick_slower"] = len(harmed)
    if all("resolved_best" in c for c in configs):
        s["tie_aware"] = tie_aware(configs, key)
    s["targets_met"] = bool(s["online"]["right_fraction"] >= 0.98
                            and s["online"]["regret_geomean"] <= 0.02
                            and s["online"]["regret_worst"] <= 0.10 and not harmed)
    return s


def tie_aware(configs: list[dict], key: str = "measured_s") -> dict:
    """The score where the measurement can resolve it. A configuration whose two step series do
    not differ at ``ALPHA`` (:func:`resolve`) is a **tie**: either pick is right. Where they do
    differ, a pick is right when it is the faster backend or within 3% of it (by `key`). Regret
    (geo-mean, worst) is over the resolved configurations; a tie costs nothing measurable."""
    ties = [c for c in configs if c["resolved_best"] is None]
    res = [c for c in configs if c["resolved_best"] is not None]
    out = {"ties": len(ties), "resolved": len(res), "alpha": ALPHA}
    for pick in ("model", "online") + (("auto_real",) if all("auto_real" in c for c in configs)
                                       else ()):
        r = np.array([c[key][c[pick]] / c[key][c["resolved_best"]] for c in res])
        right = int(np.sum(r <= 1 + WITHIN))
        out[pick] = {"right_fraction": (right + len(ties)) / len(configs),
                     "right_of_resolved": f"{right}/{len(res)}",
                     "regret_geomean_resolved": float(np.exp(np.mean(np.log(r))) - 1)
                     if r.size else 0.0,
                     "regret_worst_resolved": float(r.max() - 1) if r.size else 0.0,
                     "wrong": [_name(c) for c, x in zip(res, r) if x > 1 + WITHIN]}
    harmed = [c for c in res if c[key][c["model"]] <= (1 + WITHIN) * c[key][c["resolved_best"]]
              and c[key][c["online"]] > (1 + WITHIN) * c[key][c["model"]]]
    out["online_made_right_model_pick_slower"] = len(harmed)
    o = out["online"]
    out["targets_met"] = bool(o["right_fraction"] >= 0.98 and o["regret_geomean_resolved"] <= 0.02
                              and o["regret_worst_resolved"] <= 0.10 and not harmed)
    return out


def _name(c: dict) -> str:
    return f"{c['cluster']} {c['dist']} B{c['batch']}"


def split(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """Clusters alternate between the tune half and the held-out half (sorted by name)."""
    clusters = sorted({r["cluster"] for r in rows})
    tune = set(clusters[0::2])
    return [r for r in rows if r["cluster"] in tune], [r for r in rows if r["cluster"] not in tune]


def tune(rows: list[dict]) -> dict:
    """The online parameters that score best on `rows`: tie-aware right picks and regret over
    the resolved configurations first (fitting the parameters to unresolved noise is
    overfitting), then the strict right picks and regret. Where the shipped defaults
    (``OnlineTrial``'s) score as well as the best, they are the choice: a grid point that only
    equals them on this half is no reason to report parameters nobody runs."""
    shipped = _defaults()
    best, key, shipped_key = None, None, None
    for margin, close, alpha in itertools.product(*TUNE_GRID.values()):
        params = {"margin": margin, "close": close, "alpha": alpha}
        s = summarise(score(rows, params))
        if not s["configs"]:
            continue
        t = s.get("tie_aware", {}).get("online", {})
        k = (-t.get("right_fraction", 0), round(t.get("regret_geomean_resolved", 0), 4),
             -s["online"]["right_fraction"], round(s["online"]["regret_geomean"], 4))
        if params == shipped:
            shipped_key = k
        if key is None or k < key:
            best, key = params, k
    return shipped if shipped_key is not None and shipped_key == key else best or shipped


def _defaults() -> dict:
    """``OnlineTrial``'s defaults of the tuned parameters (what ``backend="auto"`` runs)."""
    import inspect

    from mdloader_plugin.estimator.online import OnlineTrial

    sig = inspect.signature(OnlineTrial).parameters
    return {k: sig[k].default for k in TUNE_GRID}


def evaluate(rows: list[dict]) -> dict:
    tune_rows, held_rows = split(rows)
    params = tune(tune_rows)
    out = {"params": params, "halves": {}}
    for name, part in (("tune", tune_rows), ("held_out", held_rows)):
        configs = score(part, params)
        out["halves"][name] = {
            "clusters": sorted({r["cluster"] for r in part}), "configs": configs,
            "summary": {p: summarise([c for c in configs if c["profile"] == p])
                        for p in ("own", "local")},
            "summary_mean": {p: summarise([c for c in configs if c["profile"] == p], "mean")
                             for p in ("own", "local")}}
    return out


def main() -> None:
    from bench.estimator.choice_report import plot, results_section

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="the full grid (hours, quiet machine)")
    ap.add_argument("--shapes", default="2x1@300mbit,4x1@300mbit,2x2@100mbit,2x3@100mbit",
                    help="clusters HxR@RATE, comma-separated (ignored with --full)")
    ap.add_argument("--batches", default="1,16,256")
    ap.add_argument("--dists", default="hydragnn,oc20")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--config-budget", type=float, default=60.0,
                    help="no new round of the first --rounds after this many seconds")
    ap.add_argument("--max-rounds", type=int, default=12,
                    help="sequential testing: after --rounds, more interleaved rounds while the "
                         "backends' medians are >3%% apart and the test cannot tell them apart, "
                         "up to this many (0: exactly --rounds)")
    ap.add_argument("--seq-budget", type=float, default=240.0,
                    help="no sequential round for a configuration after this many seconds")
    ap.add_argument("--cluster-timeout", type=float, default=1800)
    ap.add_argument("--auto-real", action="store_true",
                    help="also run a real backend=auto loader per configuration and profile")
    ap.add_argument("--auto-steps", type=int, default=40)
    ap.add_argument("--rescore", action="store_true",
                    help="score bench/results/backend_choice.json again without measuring")
    ap.add_argument("--append", action="store_true",
                    help="add these clusters to bench/results/backend_choice.json's rows")
    a = ap.parse_args()
    a.batches = [int(b) for b in a.batches.split(",")]
    a.dists = a.dists.split(",")
    clusters = ([f"{s}@{r}" for s in FULL_SHAPES for r in FULL_RATES] if a.full
                else a.shapes.split(","))
    if a.full:
        a.batches = FULL_BATCHES
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "backend_choice.json"
    t0 = time.perf_counter()
    if a.rescore:
        doc = json.loads(out.read_text())
    else:
        old = json.loads(out.read_text()) if a.append and out.exists() else None
        rows = [r for r in (old or {}).get("rows", []) if r["cluster"] not in clusters]
        for spec in clusters:
            rows += measure_cluster(spec, a, RESULTS)
        clusters = list(dict.fromkeys(r["cluster"] for r in rows))
        doc = {"clusters": clusters, "batches": sorted({r["batch"] for r in rows}),
               "dists": a.dists, "rounds": a.rounds, "steps": a.steps, "full": a.full,
               "rows": rows, "calibrate_s": {r["cluster"]: r["calibrate_s"] for r in rows},
               "seconds": round(time.perf_counter() - t0 + (old or {}).get("seconds", 0), 1),
               "load_avg": os.getloadavg(), "record": record(a)}
    doc["evaluation"] = evaluate(doc["rows"])
    for c in (c for h in doc["evaluation"]["halves"].values() for c in h["configs"]):
        c["predicted_s"] = {k: float(v) for k, v in c["predicted_s"].items()}
    out.write_text(json.dumps(doc, indent=1))
    plot(doc, BENCH / "backend_choice.png")
    print("\n".join(results_section(doc)))
    print(f"wrote {out.relative_to(ROOT)}, bench/backend_choice.png")


if __name__ == "__main__":
    main()
