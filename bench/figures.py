"""The benchmark figures that README.md and docs/ quote, computed from the JSON under
``bench/results/`` (one function a figure, ``FIGURES``: key -> function).

A page quotes a figure as ``<!-- figure: KEY -->VALUE<!-- /figure -->``; ``python
tools/docs_figures.py`` rewrites every ``VALUE`` from the JSON and
``tests/integration/test_bench_report.py`` fails when a quoted value differs from what its
function gives, so a number read on two pages is one number, and a re-run that moves it moves it
everywhere. Add a figure: a function below and a line in ``FIGURES``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable

import gpu_demo
import groups as groups_bench
import report_tables
from fairchem_figures import FIGURES_FAIRCHEM
from ddstore_figures import FIGURES_DDSTORE954
from convert_rate import FIGURES_CONVERT
from load_peak import FIGURES_LOAD_PEAK
from rank_cost_figures import FIGURES_RANK_COST

RESULTS = Path(__file__).resolve().parent / "results"


def _load(name: str):
    return json.loads((RESULTS / name).read_text())


def _range(lo: float, hi: float, fmt: str, unit: str = "") -> str:
    a, b = format(lo, fmt), format(hi, fmt)
    return f"{a}{unit}" if a == b else f"{a}–{b}{unit}"


def _pct(x: float, digits: int = 0) -> str:
    return f"{x * 100:.{digits}f}%"


def _of(n: int, total: int) -> str:
    return f"{n} of {total}"


# -- training ------------------------------------------------------------------------------------
def _train(variant_prefix: str) -> list[dict]:
    return [s for s in _load("training.json")["summary"] if s["variant"].startswith(variant_prefix)]


def training_native_wait() -> str:
    return _pct(_train("hydragnn-native")[0]["data_wait_share"])


def training_mdloader_wait() -> str:
    w = [s["data_wait_share"] * 100 for s in _train("mdloader")]
    return _range(min(w), max(w), ".1f", "%")


def training_speedup() -> str:
    native = _train("hydragnn-native")[0]["epoch_s"]
    r = [native / s["epoch_s"] for s in _train("mdloader")]
    return _range(min(r), max(r), ".1f", "x")


def training_mdloader_epoch() -> str:
    e = [s["epoch_s"] for s in _train("mdloader")]
    return _range(min(e), max(e), ".2f", " s")


def training_native_epoch() -> str:
    return f"{_train('hydragnn-native')[0]['epoch_s']:.2f} s"


def training_ranks() -> str:
    return str(_load("training.json")["ranks"])


# -- loaders, one host and across hosts -----------------------------------------------------------
def _by(name: str) -> tuple[list, dict]:
    rows = _load(name)["rows"]
    keys = sorted({(r["dataset"], r["ranks"], r["batch"]) for r in rows})
    return keys, {(r["dataset"], r["ranks"], r["batch"], r["loader"]): r for r in rows}


def _step_ratio(name: str, base: str) -> list[float]:
    keys, by = _by(name)
    return [by[(*k, base)]["step_median_s"] / by[(*k, "auto")]["step_median_s"]
            for k in keys if k[2] >= 32 and (*k, base) in by and (*k, "auto") in by]


def loaders_vs_file() -> str:
    r = _step_ratio("loaders.json", "file")
    return _range(min(r), max(r), ".0f", "x")


def loaders_vs_ddstore() -> str:
    r = _step_ratio("loaders.json", "ddstore")
    return _range(min(r), max(r), ".1f", "x")


def cluster_1gbit_vs_ddstore() -> str:
    r = _step_ratio("loaders_cluster.json", "ddstore")
    return _range(min(r), max(r), ".1f", "x")


def loaders_auto_right() -> str:
    keys, by = _by("loaders.json")
    right = sum(by[(*k, "auto")].get("chosen_backend") == min(
        ("onesided", "collective"), key=lambda b, k=k: by[(*k, b)]["step_median_s"])
        for k in keys)
    return _of(right, len(keys))


def loaders_date() -> str:
    return _load("loaders.json")["machine"]["date"][:10]


# -- backend choice on varied clusters ------------------------------------------------------------
def _held_out() -> dict:
    return _load("backend_choice.json")["evaluation"]["halves"]["held_out"]


def choice_heldout_right() -> str:
    s = _held_out()["summary"]["own"]
    return _of(round(s["online"]["right_fraction"] * s["configs"]), s["configs"])


def choice_heldout_regret() -> str:
    o = _held_out()["summary"]["own"]["online"]
    return f"{o['regret_geomean']:+.1%} geo-mean, {o['regret_worst']:+.0%} worst"


def choice_heldout_resolved() -> str:
    return _held_out()["summary"]["own"]["tie_aware"]["online"]["right_of_resolved"]


def choice_heldout_clusters() -> str:
    return ", ".join(_held_out()["clusters"])


def choice_heldout_when() -> str:
    utc = sorted(c["utc"] for c in _held_out()["configs"])
    return f"{utc[0][:10]} {utc[0][11:16]}–{utc[-1][11:16]} UTC"


def choice_halves_table() -> str:
    """Tune and held-out halves: the online check's score, strict and tie-aware, by median and
    by mean step, per profile."""
    ev = _load("backend_choice.json")["evaluation"]
    out = ["| half | profile | online right (median step) | regret geo / worst | right model "
           "picks made >3% slower | tie-aware: ties, resolved right | by mean step (stalls "
           "paid): right, worst |", "|---|---|---|---|---|---|---|"]
    for half, h in ev["halves"].items():
        for prof in ("own", "local"):
            s, m = h["summary"][prof], h["summary_mean"][prof]
            if not s["configs"]:
                continue
            o, t = s["online"], s["tie_aware"]
            right = round(o["right_fraction"] * s["configs"])
            out.append(f"| {half.replace('_', '-')} | {prof} | {o['right_fraction']:.0%} "
                       f"({right}/{s['configs']}) | {o['regret_geomean']:+.1%} / "
                       f"{o['regret_worst']:+.0%} | {s['online_made_right_model_pick_slower']} | "
                       f"{t['ties']}, {t['online']['right_of_resolved']} | "
                       f"{m['online']['right_fraction']:.0%}, {m['online']['regret_worst']:+.0%} |")
    return "\n\n" + "\n".join(out) + "\n\n"


def choice_heldout_met() -> str:
    return "met" if _held_out()["summary"]["own"]["targets_met"] else "missed"


# -- replica groups -------------------------------------------------------------------------------
def _gsum(name: str) -> dict:
    return groups_bench.summary(_load(name)["runs"])


def _tie_aware(name: str) -> str:
    s = _gsum(name)
    return f"{_of(s['tie_aware_right'], s['configs'])} ({s['tie_aware_right'] / s['configs']:.0%})"


def groups_dev_tie_aware() -> str:
    return _tie_aware("groups.json")


def groups_dev_strict() -> str:
    s = _gsum("groups.json")
    return _of(s["strict_right"], s["configs"])


def groups_heldout_tie_aware() -> str:
    return _tie_aware("groups_heldout.json")


def groups_heldout_strict() -> str:
    s = _gsum("groups_heldout.json")
    return _of(s["strict_right"], s["configs"])


def groups_grids_table() -> str:
    """Both grids' scores: strictly, tie-aware, within 10%, by the fetch alone."""
    out = ["| grid | configurations | strictly right | tie-aware right | within 10% | by the "
           "fetch alone (tie-aware) |", "|---|---|---|---|---|---|"]
    for name, label in (("groups.json", "development (2x2, 4x1 @ 200mbit, 1gbit; the "
                         "estimator was developed on it)"),
                        ("groups_heldout.json", "held out (3x2 @ 300mbit, 4x1 @ 500mbit; never "
                         "tuned on)")):
        s = _gsum(name)
        n = s["configs"]
        out.append(f"| {label} | {n} | {s['strict_right']} ({s['strict_right'] / n:.0%}) | "
                   f"**{s['tie_aware_right']} ({s['tie_aware_right'] / n:.0%})** | "
                   f"{s['tolerance_right']} | {s['fetch_tie_aware_right']} |")
    return "\n\n" + "\n".join(out) + "\n\n"


def _host_local(name: str, rate: str | None, kind: str, min_batch: int = 32) -> list[float]:
    """Best W = P step over the best host-local (W = ranks a host) step, per run."""
    out = []
    for run in _load(name)["runs"]:
        if (rate and run["rate"] != rate) or run["kind"] != kind or run["batch"] < min_batch:
            continue
        med = groups_bench._medians(run["rows"])
        full = max(w for w, _ in med)
        rph = int(run["shape"].split("x")[1])
        at_p = min(v for (w, _), v in med.items() if w == full)
        local = [v for (w, _), v in med.items() if w == rph]
        if local:
            out.append(at_p / min(local))
    return out


def groups_oc20_200mbit() -> str:
    r = _host_local("groups.json", "200mbit", "oc20")
    return _range(min(r), max(r), ".1f", "x")


def groups_oc20_1gbit() -> str:
    r = _host_local("groups.json", "1gbit", "oc20")
    return _range(min(r), max(r), ".1f", "x")


def groups_oc20_heldout() -> str:
    r = _host_local("groups_heldout.json", None, "oc20")
    return _range(min(r), max(r), ".1f", "x")


def groups_when() -> str:
    d = sorted(r["date"] for r in _load("groups.json")["runs"])
    return d[-1][:10]


# -- data-set scale -------------------------------------------------------------------------------
def _scale(config: str) -> dict:
    return next(r for r in _load("dataset_scale.json")["rows"] if r["config"] == config)


def _per_sample(config: str) -> float:
    """Index + order bytes a rank holds (max over ranks) over the data set's samples."""
    r = _scale(config)
    return (r["index_bytes"] + r["order_bytes"]) / r["samples"]


def scale_after_bytes() -> str:
    return f"{_per_sample('after'):.2f} B"


def scale_shared_bytes() -> str:
    return f"{_per_sample('after-shared'):.2f} B"


def scale_before_bytes() -> str:
    return f"{_per_sample('before'):.0f} B"


def scale_after_epoch_start() -> str:
    return f"{_scale('after')['epoch_start_s']:.3f} s"


def scale_before_epoch_start() -> str:
    return f"{_scale('before')['epoch_start_s']:.1f} s"


def scale_feistel_plan_1e9() -> str:
    """One step's feistel plan at N = 10^9, P = 2048, B = 32 (``bench/dataset_scale.py``)."""
    return f"{_load('dataset_scale.json')['feistel_plan_1e9_p2048_s'] * 1000:.0f} ms"


def regression_grid_geo() -> str:
    r = list(_load("scale_regression_grid.json")["loaders"]["ratios"].values())
    return f"{math.exp(sum(math.log(x) for x in r) / len(r)):.2f}x over {len(r)} cells"


# -- several data sets ------------------------------------------------------------------------
def multi_within() -> str:
    r = [(b["ratio"] - 1) * 100 for b in _load("multi.json")["backends"].values()]
    return _range(min(r), max(r), ".0f", "%")


# -- GPU ----------------------------------------------------------------------------------------
def _h200(step_ms: float) -> list[float]:
    """``backend: auto``'s data-wait share (slowest rank), % of the step, on the H200 node."""
    return [r["wait_share_max"] * 100 for r in _load("gpu_rate_h200.json")["rows"]
            if r["step_ms"] == step_ms and r["loader"] == "auto"]


def gpu_h200_wait_2ms() -> str:
    w = _h200(2.0)
    return _range(min(w), max(w), ".1f", "%")


def gpu_h200_wait_5ms() -> str:
    return f"{max(_h200(5.0)):.1f}%"


def gpu_h200_auto_wait(dataset: str, ranks: int, batch: int) -> Callable[[], str]:
    """auto's data-wait at 2 ms in one cell of the H200 run."""
    def value() -> str:
        (w,) = [r["wait_share_max"] for r in _load("gpu_rate_h200.json")["rows"]
                if (r["dataset"], r["ranks"], r["batch"], r["step_ms"], r["loader"])
                == (dataset, ranks, batch, 2.0, "auto")]
        return f"{w * 100:.1f} %"
    return value


def gpu_h200_vs_pyg_2ms() -> str:
    """PyG's ``DataLoader`` (0 workers) data-wait over auto's, per cell, at 2 ms on the H200."""
    by = {(r["dataset"], r["ranks"], r["batch"], r["loader"]): r["wait_share_max"]
          for r in _load("gpu_rate_h200.json")["rows"] if r["step_ms"] == 2.0}
    x = [by[(*k[:3], "pyg-nw0")] / w for k, w in by.items()
         if k[3] == "auto" and (*k[:3], "pyg-nw0") in by]
    return _range(min(x), max(x), ".0f", "x")


def _demo(variant_prefix: str, field: str) -> list[float]:
    return [row[field] for row in _load("gpu_demo.json")["rows"]
            if row["variant"].startswith(variant_prefix)]


def gpu_demo_speedup() -> str:
    r = _demo("mdloader", "speedup")
    return _range(min(r), max(r), ".1f", "x")


def _demo_wait(variant_prefix: str) -> str:
    w = [x * 100 for x in _demo(variant_prefix, "data_wait_share")]
    return _range(min(w), max(w), ".1f", "%")


def gpu_demo_device_vs_host() -> str:
    """Epoch with ``device: auto`` (pinned or not) over the epoch with host batches, same ranks."""
    rows = _load("gpu_demo.json")["rows"]
    host = {r["ranks"]: r["epoch_s"] for r in rows if r["variant"] == "mdloader-host"}
    x = [r["epoch_s"] / host[r["ranks"]] for r in rows if r["variant"].startswith("mdloader-gpu")]
    return _range(min(x), max(x), ".2f", "x")


def gpu_demo_table() -> str:
    """The GPU demo's table as RESULTS.md shows it (without its setup line)."""
    return "\n\n" + "\n".join(gpu_demo.table(_load("gpu_demo.json"))[2:]) + "\n\n"


# -- fixed per-step cost ------------------------------------------------------------------------
def _fetch_cells() -> list[tuple[float, float]]:
    """(auto fetch / real DDStore fetch, auto fetch / floor) per cell of the latest round."""
    keys, by = _by("loaders_fetch_i21_after.json")
    out = []
    for k in keys:
        a, dd = by.get((*k, "auto")), by.get((*k, "ddstore-real"))
        if a and dd:
            out.append((a["fetch_median_s"] / dd["fetch_median_s"],
                        a["fetch_median_s"] / a["floor_s"]))
    return out


def fetch_below_ddstore() -> str:
    c = _fetch_cells()
    return _of(sum(r <= 1 for r, _ in c), len(c))


def fetch_over_ddstore_range() -> str:
    r = [x for x, _ in _fetch_cells()]
    return _range(min(r), max(r), ".2f", "x")


def fetch_floor_met() -> str:
    """Cells at batch >= 32 whose fetch is within 3x the memcpy floor, latest round."""
    keys, by = _by("loaders_fetch_i21_after.json")
    over = [by[(*k, "auto")]["fetch_median_s"] / by[(*k, "auto")]["floor_s"]
            for k in keys if k[2] >= 32 and (*k, "auto") in by]
    return _of(sum(x <= 3 for x in over), len(over))


def producer_cpu_after() -> str:
    """The producer's CPU time a step after the A/B's change, over its cases."""
    ms = [m["after"] for m in _load("producer_cost_ab.json")["median_ms"].values()]
    return _range(min(ms), max(ms), ".1f", " ms")


# -- tables (a multi-line value: the marker pair on lines of their own) -----------------------
def producer_ab_table() -> str:
    """``bench/probes/producer_cost.py --before``'s A/B: CPU ms a step before and after, each
    round, and the samples/s one rank's loader sustains on a free core after."""
    d = _load("producer_cost_ab.json")
    runs = d["runs"]  # {tree: [{case: ms} a round]}
    out = ["| case (data:batch) | before, ms | after, ms | change | rounds before | rounds after | "
           "after: samples/s one rank's loader sustains on one free core |",
           "|---|---:|---:|---:|---|---|---:|"]
    for case, m in d["median_ms"].items():
        rounds = {t: ", ".join(f"{r[case]:.2f}" for r in runs[t]) for t in runs}
        rate = int(case.split(":")[1]) / (m["after"] / 1000)
        out.append(f"| {case} | {m['before']:.2f} | {m['after']:.2f} | "
                   f"{m['after'] / m['before'] - 1:+.0%} | {rounds['before']} | {rounds['after']} "
                   f"| {round(rate, -2):,.0f} |")
    return "\n\n" + "\n".join(out) + "\n\n"


def fetch_table() -> str:
    """The before/after fetch grid of RESULTS.md's fixed per-step cost section (its first
    table)."""
    lines = report_tables.fetch_cost_tables(
        _load("loaders_fetch_i21_before.json"), _load("loaders_fetch_i21_after.json"),
        (_load("fetch_profile_i21_n2.json"), _load("fetch_profile_i21_n4.json")),
        before_what="the tree before this round, b5124e3")
    start = next(i for i, x in enumerate(lines) if x.startswith("| data |"))
    stop = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return "\n\n" + "\n".join(lines[start:stop]) + "\n\n"


def targets_table() -> str:
    """The targets table of RESULTS.md (one host, across hosts, training)."""
    clusters = [_load(n) for n in ("loaders_cluster.json", "loaders_cluster_200mbit.json")]
    lines = report_tables.targets(_load("loaders.json"), _load("training.json"), clusters)
    return "\n\n" + "\n".join(lines) + "\n\n"


def _cluster_geo(name: str) -> str:
    keys, by = _by(name)
    r = [by[(*k, "auto")]["step_median_s"] / min(by[(*k, "onesided")]["step_median_s"],
                                                  by[(*k, "collective")]["step_median_s"])
         for k in keys if (*k, "onesided") in by and (*k, "collective") in by]
    return f"{math.exp(sum(math.log(x) for x in r) / len(r)) - 1:+.1%}"


def cluster_200mbit_vs_ddstore(dataset: str) -> Callable[[], str]:
    def value() -> str:
        keys, by = _by("loaders_cluster_200mbit.json")
        r = [by[(*k, "ddstore")]["step_median_s"] / by[(*k, "auto")]["step_median_s"]
             for k in keys if k[0] == dataset and k[2] >= 32 and (*k, "ddstore") in by]
        return _range(min(r), max(r), ".1f", "x")
    return value


def _fetch_ratio(name: str, base: str) -> list[float]:
    keys, by = _by(name)
    return [by[(*k, base)]["fetch_median_s"] / by[(*k, "auto")]["fetch_median_s"]
            for k in keys if k[2] >= 32 and (*k, base) in by]


def loaders_vs_file_fetch() -> str:
    r = _fetch_ratio("loaders.json", "file")
    return _range(min(r), max(r), ",.0f", "x")


def _estimator(which: str) -> dict:
    return _load("estimator_accuracy.json")["summary"][which]


def estimator_model_right() -> str:
    s = _load("estimator_accuracy.json")["summary"]
    right = round(s["model"]["right_pick_fraction"] * s["configs"])
    return f"{s['model']['right_pick_fraction']:.1%} ({right}/{s['configs']})"


def estimator_model_regret() -> str:
    m = _estimator("model")
    return f"{m['regret_geomean']:.1%} geometric-mean regret, {m['regret_worst']:.0%} worst"


def estimator_online_right() -> str:
    return f"{_estimator('online')['right_pick_fraction']:.0%}"


def estimator_cluster_table() -> str:
    """Auto's picks on 2 emulated hosts per link rate, and the one-node grid beside them."""
    est = _load("estimator_cluster.json")["summary"]
    one = _load("estimator_accuracy.json")["summary"]
    out = ["| link | model: right picks | regret geo-mean / worst | after the online check |",
           "|---|---|---|---|"]
    for rate, s in list(est.items()) + [("one node (the single-node grid)", one)]:
        m, o = s["model"], s["online"]
        out.append(f"| {rate} | {m['right_pick_fraction']:.0%} | {m['regret_geomean']:+.1%} / "
                   f"{m['regret_worst']:+.0%} | {o['right_pick_fraction']:.0%}, "
                   f"{o['regret_geomean']:+.1%} |")
    return "\n\n" + "\n".join(out) + "\n\n"


def multi_table() -> str:
    """Fetch with 3 data sets in one store against one file of the same size."""
    m = _load("multi.json")
    out = ["| backend | 3 data sets (ms) | one file (ms) | ratio |", "|---|---|---|---|"]
    for b, r in m["backends"].items():
        out.append(f"| {b} | {r['median_ms']['multi']:.3f} | {r['median_ms']['single']:.3f} | "
                   f"{r['ratio']:.2f} |")
    return "\n\n" + "\n".join(out) + "\n\n"



def async_progress_lines(d: dict) -> list[str]:
    """Fetch p50/p95 under MPICH across emulated hosts: MDLoader's poller, MPICH's async
    progress thread beside it, and MPICH's thread alone (bench/probes/async_progress.py)."""
    out = ["| progress | backend | fetch p50 (ms) | fetch p95 (ms) | job wall (s) |",
           "|---|---|---:|---:|---:|"]
    names = {"poller": "MDLoader's poller (default)",
             "poller+mpich_async": "poller + `MPICH_ASYNC_PROGRESS=1`",
             "mpich_async": "`MPICH_ASYNC_PROGRESS=1` alone"}
    for r in d["rows"]:
        out.append(f"| {names[r['arm']]} | {r['backend']} | {r['p50_ms']:.1f} | "
                   f"{r['p95_ms']:.1f} | {r['job_wall_s']:.0f} |")
    return out


def async_progress_table() -> str:
    d = _load("async_progress.json")
    head = (f"MPICH wheel, {d['cluster']} emulated, batch {d['batch']}, a {d['compute_ms']:g} ms "
            f"trainer step outside MPI, {d['rounds']} interleaved rounds, {d['date']}, load "
            f"{d['load']:.0f} on 2 cores:")
    return "\n\n" + head + "\n\n" + "\n".join(async_progress_lines(d)) + "\n\n"

# -- GIL-free producer (bench/gil_free.py) ---------------------------------------------------------
GIL_CASES = (("hydragnn", 32), ("hydragnn", 128), ("oc20", 8), ("oc20", 32))


def _gil_rows(name: str, ranks: int, ms: float) -> list[dict]:
    rows = {(r["dataset"], r["batch"]): r for r in _load(name)["rows"]
            if (r["ranks"], r["loader"], r["step_ms"]) == (ranks, "onesided", ms)}
    return [rows[c] for c in GIL_CASES]


def _gil_waits(name: str, ranks: int, ms: float) -> str:
    return " / ".join(f"{100 * r['wait_share_max']:.1f}" for r in _gil_rows(name, ranks, ms)) + " %"


def _gil_pace(name: str, ms: float) -> str:
    d = _load(name)
    alone = d["trainer_alone_ms"][f"{ms:g}"]
    pace = [100 * r["samples_per_s"] * alone / 1e3 / r["batch"] for r in _gil_rows(name, 1, ms)]
    return _range(min(pace), max(pace), ".0f", "%")


def gil_held_ms() -> str:
    d = _load("producer_cost.json")["cases"]
    return " / ".join(f"{d[f'{ds}:{b}']['auto']['gil_held_ms']:.3f}" for ds, b in GIL_CASES) + " ms"


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def _gil_wait_met(ms: float, target: float) -> str:
    return _verdict(all(100 * r["wait_share_max"] <= target
                        for r in _gil_rows("gpu_rate_gilfree.json", 1, ms)))


def gil_held_met() -> str:
    d = _load("producer_cost.json")["cases"]
    return _verdict(all(d[f"{ds}:{b}"]["auto"]["gil_held_ms"] <= 0.25 for ds, b in GIL_CASES))


FIGURES_GIL = {
    "gil.held_met": gil_held_met,
    "gil.wait_1ms_met": lambda: _gil_wait_met(1.0, 2.0),
    "gil.wait_2ms_met": lambda: _gil_wait_met(2.0, 1.0),
    "gil.waits_met": lambda: ("**met**" if _gil_wait_met(1.0, 2.0) == _gil_wait_met(2.0, 1.0)
                              == "**met**" else "**missed**"),
    "gil.date": lambda: _load("gpu_rate_gilfree.json")["machine"]["date"],
    "gil.load": lambda: str(_load("gpu_rate_gilfree.json")["machine"]["loadavg_start"][0]),
    "gil.held_ms": gil_held_ms,
    "gil.wait_1ms": lambda: _gil_waits("gpu_rate_gilfree.json", 1, 1.0),
    "gil.wait_2ms": lambda: _gil_waits("gpu_rate_gilfree.json", 1, 2.0),
    "gil.wait_2ranks_1ms": lambda: _gil_waits("gpu_rate_gilfree.json", 2, 1.0),
    "gil.wait_2ranks_2ms": lambda: _gil_waits("gpu_rate_gilfree.json", 2, 2.0),
    "gil.queue_wait_1ms": lambda: _gil_waits("gpu_rate_gilfree_queue.json", 1, 1.0),
    "gil.queue_wait_2ms": lambda: _gil_waits("gpu_rate_gilfree_queue.json", 1, 2.0),
    "gil.pace_1ms": lambda: _gil_pace("gpu_rate_gilfree.json", 1.0),
    "gil.pace_2ms": lambda: _gil_pace("gpu_rate_gilfree.json", 2.0),
    "gil.numpy_pace_1ms": lambda: _gil_pace("gpu_rate_gilfree_numpy.json", 1.0),
}

FIGURES: dict[str, Callable[[], str]] = {
    "estimator_cluster.table": estimator_cluster_table,
    "multi.table": multi_table,
    "async_progress.table": async_progress_table,
    "targets.table": targets_table,
    "fetch.table": fetch_table,
    "producer.ab_table": producer_ab_table,
    "producer.cpu_after": producer_cpu_after,
    "loaders.vs_file_fetch": loaders_vs_file_fetch,
    "cluster_1gbit.auto_geo": lambda: _cluster_geo("loaders_cluster.json"),
    "cluster_200mbit.auto_geo": lambda: _cluster_geo("loaders_cluster_200mbit.json"),
    "cluster_200mbit.vs_ddstore_molecules": cluster_200mbit_vs_ddstore("hydragnn"),
    "cluster_200mbit.vs_ddstore_oc20": cluster_200mbit_vs_ddstore("oc20"),
    "estimator.model_right": estimator_model_right,
    "estimator.model_regret": estimator_model_regret,
    "estimator.online_right": estimator_online_right,
    "fetch.floor_met": fetch_floor_met,
    "training.native_wait": training_native_wait,
    "training.mdloader_wait": training_mdloader_wait,
    "training.speedup": training_speedup,
    "training.mdloader_epoch": training_mdloader_epoch,
    "training.native_epoch": training_native_epoch,
    "training.ranks": training_ranks,
    "loaders.date": loaders_date,
    "loaders.vs_file": loaders_vs_file,
    "loaders.vs_ddstore": loaders_vs_ddstore,
    "loaders.auto_right": loaders_auto_right,
    "cluster_1gbit.vs_ddstore": cluster_1gbit_vs_ddstore,
    "choice.heldout_right": choice_heldout_right,
    "choice.heldout_regret": choice_heldout_regret,
    "choice.heldout_resolved": choice_heldout_resolved,
    "choice.heldout_clusters": choice_heldout_clusters,
    "choice.heldout_when": choice_heldout_when,
    "choice.heldout_met": choice_heldout_met,
    "choice.halves_table": choice_halves_table,
    "groups.dev_tie_aware": groups_dev_tie_aware,
    "groups.dev_strict": groups_dev_strict,
    "groups.heldout_tie_aware": groups_heldout_tie_aware,
    "groups.heldout_strict": groups_heldout_strict,
    "groups.oc20_200mbit": groups_oc20_200mbit,
    "groups.oc20_1gbit": groups_oc20_1gbit,
    "groups.oc20_heldout": groups_oc20_heldout,
    "groups.date": groups_when,
    "groups.grids_table": groups_grids_table,
    "scale.after_bytes": scale_after_bytes,
    "scale.shared_bytes": scale_shared_bytes,
    "scale.before_bytes": scale_before_bytes,
    "scale.after_epoch_start": scale_after_epoch_start,
    "scale.before_epoch_start": scale_before_epoch_start,
    "scale.torch_bytes": lambda: f"{_per_sample('torch'):.2f} B",
    "scale.torch_epoch_start": lambda: f"{_scale('torch')['epoch_start_s']:.1f} s",
    "scale.feistel_plan_1e9": scale_feistel_plan_1e9,
    "regression.grid_geo": regression_grid_geo,
    "multi.within": multi_within,
    "gpu.h200_wait_2ms": gpu_h200_wait_2ms,
    "gpu.h200_wait_5ms": gpu_h200_wait_5ms,
    "gpu.h200_vs_pyg_2ms": gpu_h200_vs_pyg_2ms,
    "gpu.h200_molecules32_2ranks": gpu_h200_auto_wait("hydragnn", 2, 32),
    "gpu.demo_speedup": gpu_demo_speedup,
    "gpu.demo_native_wait": lambda: _demo_wait("hydragnn"),
    "gpu.demo_host_wait": lambda: _demo_wait("mdloader-host"),
    "gpu.demo_device_wait": lambda: _demo_wait("mdloader-gpu"),
    "gpu.demo_device_vs_host": gpu_demo_device_vs_host,
    "gpu.demo_table": gpu_demo_table,
    "fetch.below_ddstore": fetch_below_ddstore,
    "fetch.over_ddstore": fetch_over_ddstore_range,
}
FIGURES.update(FIGURES_GIL)
FIGURES.update(FIGURES_RANK_COST)
FIGURES.update(FIGURES_FAIRCHEM)
FIGURES.update(FIGURES_DDSTORE954)
FIGURES.update(FIGURES_CONVERT)
FIGURES.update(FIGURES_LOAD_PEAK)


def value(key: str) -> str:
    """The figure ``key`` as pages quote it (``KeyError`` names an unknown key)."""
    return FIGURES[key]()
