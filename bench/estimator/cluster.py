"""Does `backend: auto` still pick the faster backend when ranks span hosts and the link is slow?

The estimator-accuracy benchmark (``estimator_accuracy.py``) runs on one shared-memory node, where
the two backends differ by 1.0-1.5x and the network term of the cost models never matters. Here
the same measurement runs on the emulated multi-node cluster (``mdloader cluster``: network
namespaces, real Open MPI over TCP, a ``tc tbf`` rate on every host's link), at two link rates:

1. per rate, ``mdloader calibrate`` on 2 hosts x 2 ranks measures a profile with separate intra-
   and inter-node parameters (``calibrate.py``);
2. per rate and shape (2 hosts x {1, 2} ranks), both backends' ``fetch`` run for real on a
   synthetic store (``estimator_accuracy.py --worker``: batch {4,16,64,256} x HydraGNN-like and
   OC20-like record sizes, median of the slowest rank's step);
3. auto's pick is the choice ``backend="auto"`` makes at start (``choose_initial``: world size,
   ranks per host, batch, record sizes, that rate's profile); "online" is the pick after the
   loader's online trial (switch when the other backend is measured > 5% faster).

Reports right-pick rate and regret (auto's time over the best backend's) per rate, the configs
whose faster backend changes with the rate, and the single-node grid's summary beside them.
Why 200mbit and not 1gbit by default: under the CPU load of a shared 2-core box TCP between
namespaces itself tops out near 1 Gbit/s, so a 1gbit limit barely binds (``cluster/netns.py``).
Needs root. ~3 minutes on 2 cores under load (quick: ~2.5). Writes
``bench/results/estimator_cluster.json`` and ``bench/estimator_cluster.png``; everything it
creates is removed on exit, also on error.

    python -m bench.estimator.cluster [--rates 200mbit,unlimited] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from bench.harness import BENCH, RESULTS, ROOT, module, record

ACCURACY = module("bench.estimator.accuracy")
HOSTS, CAL_RPH = 2, 2


def run_job(cl, args: list[str], timeout: float) -> None:
    """One MPI job on the cluster; a failure exits with its last stderr lines."""
    res = cl.run([sys.executable, "-m", "mpi4py", *args], timeout=timeout, capture_output=True,
                 text=True, cwd=ROOT, env={"PYTHONUNBUFFERED": "1"})
    if res.returncode:
        raise SystemExit(f"estimator_cluster: `{' '.join(args[:4])}` on {cl.describe()} failed "
                         f"(exit {res.returncode}):\n{res.stderr[-2000:]}")


def calibrate(cl, rate: str, quick: bool) -> Path:
    path = RESULTS / f"profile-cluster-{rate}.json"
    t0 = time.perf_counter()
    run_job(cl, ["-m", "mdloader_plugin", "calibrate", "--out", str(path),
                 *(["--quick"] if quick else [])], timeout=600)
    print(f"  calibrated at {rate} in {time.perf_counter() - t0:.0f} s -> {path.name}", flush=True)
    return path


def measure(cl, rate: str, batches: list[int], steps: int) -> list[dict]:
    tmp = RESULTS / f".cluster-{rate}-{cl.ranks_per_host}.json"
    t0 = time.perf_counter()
    run_job(cl, [*ACCURACY, "--worker", "--batches", ",".join(map(str, batches)),
                 "--steps", str(steps), "--out", str(tmp)], timeout=600)
    rows = json.loads(tmp.read_text())
    tmp.unlink()
    print(f"  measured {cl.size} ranks ({HOSTS} hosts x {cl.ranks_per_host}) at {rate} in "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    return [{**r, "rate": rate, "ranks_per_host": cl.ranks_per_host} for r in rows]


def run_grid(rates: list[str], shapes: list[int], batches: list[int], steps: int,
             quick: bool) -> tuple[list[dict], dict[str, str]]:
    """Calibrate per rate (on the 2-ranks-a-host shape) and measure every shape x rate."""
    from mdloader_plugin.devtools.cluster import Cluster

    rows, profiles = [], {}
    name = f"eb{os.getpid() % 10000}"
    for rph in sorted(shapes, key=lambda r: r != CAL_RPH):  # the calibrating shape first
        with Cluster.up(hosts=HOSTS, ranks_per_host=rph, rate=rates[0], name=name) as cl:
            for rate in rates:
                cl.set_rate(rate)
                if rph == CAL_RPH:
                    profiles[rate] = str(calibrate(cl, rate, quick).relative_to(ROOT))
                rows += measure(cl, rate, batches, steps)
    return rows, profiles


def evaluate(rows: list[dict], profiles: dict[str, str], margin: float = 0.05) -> dict:
    """Per rate: join both backends' times per config, add the model's pick, score the picks."""
    from bench.estimator.accuracy import summarise
    from mdloader_plugin.estimator import choose_initial, get_profile

    configs: dict[tuple, dict] = {}
    for r in rows:
        key = (r["rate"], r["ranks_per_host"], r["dist"], r["batch"])
        c = configs.setdefault(key, {k: r[k] for k in ("rate", "ranks", "ranks_per_host", "dist",
                                                       "batch", "mean_bytes", "std_bytes")})
        c.setdefault("measured_s", {})[r["backend"]] = r["measured_s"]
    for c in configs.values():
        sizes = _sizes_like(c["mean_bytes"], c["std_bytes"])
        d = choose_initial(c["ranks"], c["ranks_per_host"], c["batch"], sizes,
                           get_profile(str(ROOT / profiles[c["rate"]])))
        m = c["measured_s"]
        other = next(k for k in m if k != d.backend)
        c.update(predicted_s=d.predicted_s, auto=d.backend, best=min(m, key=m.get),
                 auto_online=other if m[other] < m[d.backend] * (1 - margin) else d.backend)
    out = list(configs.values())
    per_rate = {rate: summarise([c for c in out if c["rate"] == rate]) for rate in profiles}
    return {"configs": out, "summary": per_rate, "network_changes": changes(out, list(profiles))}


def _sizes_like(mean: float, std: float) -> np.ndarray:
    """Two record sizes with the measured mean and standard deviation (all the model reads)."""
    return np.array([mean - std, mean + std])


def changes(configs: list[dict], rates: list[str]) -> list[dict]:
    """Configs (shape, data, batch) whose measured best backend or auto pick differs by rate."""
    by = {}
    for c in configs:
        by.setdefault((c["ranks_per_host"], c["dist"], c["batch"]), {})[c["rate"]] = c
    out = []
    for (rph, dist, batch), per in sorted(by.items()):
        if len(per) < 2:
            continue
        best = {r: per[r]["best"] for r in rates}
        auto = {r: per[r]["auto"] for r in rates}
        if len(set(best.values())) > 1 or len(set(auto.values())) > 1:
            out.append({"ranks_per_host": rph, "dist": dist, "batch": batch, "best": best,
                        "auto": auto, "measured_s": {r: per[r]["measured_s"] for r in rates}})
    return out


def plot(result: dict, path: Path) -> None:
    """Left: predicted vs measured per rate. Right: collective/onesided measured ratio by batch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = list(result["summary"])
    colors = dict(zip(rates, ("tab:red", "tab:blue", "tab:green", "tab:purple")))
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.8))
    for c in result["configs"]:
        for backend, marker in (("onesided", "o"), ("collective", "s")):
            ax.scatter(c["predicted_s"][backend], c["measured_s"][backend], marker=marker,
                       color=colors[c["rate"]], alpha=0.6)
    lo = min(min(c["predicted_s"].values()) for c in result["configs"]) / 2
    hi = max(max(c["measured_s"].values()) for c in result["configs"]) * 2
    ax.plot([lo, hi], [lo, hi], "k--", lw=1)
    ax.set(xscale="log", yscale="log", xlabel="predicted s/step", ylabel="measured s/step",
           title="circles onesided, squares collective")
    _ratio_panel(bx, result, colors)
    for rate in rates:
        s = result["summary"][rate]["model"]
        ax.scatter([], [], color=colors[rate], label=f"{rate}: right picks "
                   f"{s['right_pick_fraction']:.0%}, regret {s['regret_geomean']:.1%}")
    ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("estimator on the emulated cluster (2 hosts, real Open MPI over rate-limited "
                 "TCP links)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _ratio_panel(bx, result: dict, colors: dict) -> None:
    styles = {(1, "hydragnn"): "-", (1, "oc20"): ":", (2, "hydragnn"): "--", (2, "oc20"): "-."}
    series: dict[tuple, list] = {}
    for c in result["configs"]:
        series.setdefault((c["rate"], c["ranks_per_host"], c["dist"]), []).append(c)
    for (rate, rph, dist), cs in sorted(series.items()):
        cs.sort(key=lambda c: c["batch"])
        x = [c["batch"] for c in cs]
        y = [c["measured_s"]["collective"] / c["measured_s"]["onesided"] for c in cs]
        bx.plot(x, y, styles.get((rph, dist), "-"), color=colors[rate], lw=1,
                label=f"{rate}, {HOSTS}x{rph}, {dist}")
        for xi, yi, c in zip(x, y, cs):  # filled: auto picked the faster one
            bx.scatter(xi, yi, color=colors[rate] if c["auto"] == c["best"] else "white",
                       edgecolors=colors[rate], zorder=3)
    _single_node_lines(bx, result)
    bx.axhline(1.0, color="k", lw=0.8)
    bx.set(xscale="log", yscale="log", xlabel="batch size per rank",
           ylabel="measured collective / onesided (>1: onesided faster)",
           title="filled: auto picked the faster backend")
    bx.legend(fontsize=6)


def _single_node_lines(bx, result: dict) -> None:
    """The same world sizes on ONE node (from ``estimator_accuracy.json``), in grey."""
    one = result.get("single_node") or {}
    first = result["rates"][0]
    series: dict[tuple, list] = {}
    for p in one.get("same_configs", []):
        if p["rate"] == first:
            series.setdefault((p["ranks"], p["dist"]), []).append(p)
    for (ranks, dist), ps in sorted(series.items()):
        ps.sort(key=lambda p: p["batch"])
        m = [p["one_node"]["measured_s"] for p in ps]
        bx.plot([p["batch"] for p in ps], [t["collective"] / t["onesided"] for t in m],
                ":" if dist == "oc20" else "-", color="grey", lw=1,
                label=f"ONE node, {ranks} ranks, {dist}")


def single_node(result: dict) -> dict | None:
    """The single-node grid (``estimator_accuracy.json``): its summary, and the configs run there
    with the same world size, data and batch as here, beside the cluster's 2 x R shape."""
    path = RESULTS / "estimator_accuracy.json"
    if not path.exists():
        return None
    doc = json.loads(path.read_text())
    one = {(c["ranks"], c["dist"], c["batch"]): c for c in doc.get("configs", [])}
    pairs = []
    for c in result["configs"]:
        s = one.get((c["ranks"], c["dist"], c["batch"]))
        if s:
            pairs.append({"ranks": c["ranks"], "dist": c["dist"], "batch": c["batch"],
                          "rate": c["rate"], "one_node": _pick(s),
                          f"{HOSTS}_hosts": _pick(c)})
    return {"summary": doc.get("summary"), "quick": doc.get("quick"), "file": path.name,
            "same_configs": pairs,
            "best_differs": sum(p["one_node"]["best"] != p[f"{HOSTS}_hosts"]["best"]
                                for p in pairs)}


def _pick(c: dict) -> dict:
    return {"measured_s": c["measured_s"], "best": c["best"], "auto": c["auto"]}


def report(result: dict) -> None:
    for rate, s in result["summary"].items():
        for label in ("model", "online"):
            x = s[label]
            print(f"{rate:>10} {label:>6}: right picks {x['right_pick_fraction']:.0%} of "
                  f"{s['configs']}, regret geo-mean {x['regret_geomean']:+.1%}, worst "
                  f"{x['regret_worst']:+.1%}")
    one = result.get("single_node")
    if one and one["same_configs"]:
        print(f"  vs one node: the faster backend differs in {one['best_differs']} of "
              f"{len(one['same_configs'])} configs run on both (same ranks, data, batch)")
        for p in one["same_configs"][:3]:
            a, b = p["one_node"], p[f"{HOSTS}_hosts"]
            print(f"    {p['ranks']} ranks {p['dist']} batch {p['batch']}: one node "
                  f"{_ms(a['measured_s'])} -> best {a['best']}, auto {a['auto']}; {HOSTS} hosts "
                  f"at {p['rate']} {_ms(b['measured_s'])} -> best {b['best']}, auto {b['auto']}")
    for ch in result["network_changes"]:
        times = "; ".join(f"{r}: {_ms(m)}" for r, m in ch["measured_s"].items())
        print(f"  choice changes: {HOSTS}x{ch['ranks_per_host']} {ch['dist']} batch "
              f"{ch['batch']}: best {ch['best']}, auto {ch['auto']} ({times})")


def _ms(times: dict) -> str:
    return ", ".join(f"{b} {t * 1e3:.1f} ms" for b, t in sorted(times.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="200mbit,unlimited",
                    help="link rates, comma-separated tc rates or 'unlimited' (default: "
                         "200mbit,unlimited)")
    ap.add_argument("--batches", default="4,16,64,256", help="batch sizes per rank")
    ap.add_argument("--steps", type=int, default=4, help="measured steps per config (median)")
    ap.add_argument("--quick", action="store_true",
                    help="quick calibration and 3 steps (~3-4 minutes)")
    a = ap.parse_args()
    from mdloader_plugin.core.errors import MDLoaderError

    rates = [r.strip() for r in a.rates.split(",") if r.strip()]
    batches = [int(b) for b in a.batches.split(",")]
    steps = 3 if a.quick else a.steps
    RESULTS.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        rows, profiles = run_grid(rates, [1, CAL_RPH], batches, steps, a.quick)
    except MDLoaderError as exc:
        raise SystemExit(f"estimator_cluster: {exc}") from None
    result = evaluate(rows, profiles)
    result.update(hosts=HOSTS, rates=rates, batches=batches, steps=steps, quick=a.quick,
                  profiles=profiles, seconds=round(time.perf_counter() - t0, 1),
                  load_avg=os.getloadavg())
    result["single_node"] = single_node(result)
    result["date"] = time.strftime("%F %H:%M UTC", time.gmtime())
    result["record"] = record(a)
    out = RESULTS / "estimator_cluster.json"
    out.write_text(json.dumps(result, indent=1))
    plot(result, BENCH / "estimator_cluster.png")
    report(result)
    print(f"wrote {out.relative_to(ROOT)}, bench/estimator_cluster.png in "
          f"{result['seconds']:.0f} s")


if __name__ == "__main__":
    main()
