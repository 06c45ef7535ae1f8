"""Did the scale work (issue 19) slow anything down? Before/after tables from benchmark runs.

The benchmarks the compact index and the scalable order could affect are run twice each, on the
tree before issue 19 (``git archive 82fc212``, the commit before the compact index) and on this
one, alternately, in one session under the bench lock (``flock /work/wt/bench.lock``):
``bench/loaders/compare.py --loaders collective,onesided,auto`` (reduced grid),
``bench/loaders/training.py``
(reduced) and ``bench/scale/step.py`` (per-step index and order cost, this tree only: it
interleaves the ``full`` index, which is the representation before issue 19, with the compact
one). The committed figures before issue 19 (``git show 0a94d52:bench/results/loaders.json``)
are listed too, but they come from another host (an Intel Xeon VM; these runs: AMD EPYC), so
only the same-session columns compare.

    python -m bench.scale.regression --pre A.json,B.json --cur C.json,D.json \\
        [--train-pre T.json --train-cur U.json] [--step S.json]

Writes ``bench/results/scale_regression.json`` and ``.md`` (included in RESULTS.md and
docs/scale.md).

The targeted re-check of the two 4-rank cells that stayed ~1.3x (``--ab DIR``: runs of
``bench/loaders/compare.py --ranks 4 --batches 4 --loaders collective,onesided --steps 8 --repeats
3``
saved as ``pre_<i>.json``/``cur_<i>.json`` in ABBA order under the lock, and
``bench/scale/collective_step_cpu.py`` from each tree as ``cpu[1024]_<pre|cur>_<i>.json``; optional
``bench/loaders/training.py`` runs as ``train_<pre|cur>_<i>.json``) writes
``scale_regression_ab.json``/``.md`` instead (RESULTS.md and docs/scale.md include it too):

    python -m bench.scale.regression --ab bench/results/scale_regression_ab

Per cell the best (smallest) step median of the runs of each tree is compared:
on a shared, loaded machine the best of a few runs is the least contaminated figure.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
from pathlib import Path

import numpy as np

from bench.harness import BENCH as HERE
COMMITTED = "0a94d52"  # the last loaders.json before issue 19 landed


def mann_whitney(a: list[float], b: list[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test of samples `a` and `b`: (U of b over a, p). Exact (every
    split of the pooled runs enumerated, ties counted half) when there are at most 40,000
    splits, else the normal approximation. No scipy: the bench needs only numpy."""
    from itertools import combinations

    a, b = [float(x) for x in a], [float(x) for x in b]
    na, nb = len(a), len(b)
    if not na or not nb:
        return float("nan"), float("nan")

    def u_of(xs, ys):  # pairs with y > x, ties half
        return sum((y > x) + 0.5 * (y == x) for x in xs for y in ys)

    u, mean = u_of(a, b), na * nb / 2
    pool = a + b
    if math.comb(na + nb, nb) <= 40000:
        us = [u_of([pool[i] for i in range(na + nb) if i not in pick], [pool[i] for i in pick])
              for pick in map(set, combinations(range(na + nb), nb))]
        p = sum(abs(x - mean) >= abs(u - mean) - 1e-9 for x in us) / len(us)
        return u, float(p)
    sd = math.sqrt(na * nb * (na + nb + 1) / 12)
    z = (abs(u - mean) - 0.5) / sd
    return u, float(math.erfc(max(z, 0.0) / math.sqrt(2)))


def hodges_lehmann(a: list[float], b: list[float]) -> float:
    """Median of all differences b_j - a_i: the shift of `b` over `a` (robust to outlier runs)."""
    return float(np.median([y - x for x in a for y in b]))


def _rows(d: dict) -> dict:
    return {(r["dataset"], r["ranks"], r["batch"], r["loader"]): r for r in d["rows"]}


def _committed() -> dict:
    out = subprocess.run(["git", "show", f"{COMMITTED}:bench/results/loaders.json"],
                         capture_output=True, text=True, cwd=HERE.parent)
    return _rows(json.loads(out.stdout)) if out.returncode == 0 else {}


def _load_note(runs: list[dict]) -> str:
    return "; ".join(f"{r['machine']['date'][11:16]} load {r['machine']['loadavg_start'][0]}"
                     f"->{r['machine']['loadavg_end'][0]}" for r in runs)


def _harness_note(cur: list[dict]) -> str:
    """Which PSS sampling the "now" runs used: the tree before issue 19 samples after every
    step and times every step, as ``bench/loaders/compare.py --pss-every 1`` does."""
    every = sorted({d.get("pss_every", 1) for d in cur})
    if every == [1]:
        return ("Both trees ran the same harness (PSS after every step, every step timed: the "
                "\"now\" runs with `--pss-every 1`).")
    return (f"The \"now\" runs sampled PSS every {'/'.join(map(str, every))} steps (the step "
            "after a sample untimed), the tree before issue 19 after every step: not the same "
            "harness.")


def loaders_table(pre: list[dict], cur: list[dict]) -> tuple[list[str], dict]:
    old, pre_r, cur_r = _committed(), [_rows(d) for d in pre], [_rows(d) for d in cur]
    ms = lambda r: r["step_median_s"] * 1e3  # noqa: E731
    lines = ["| data set | P | B | backend | committed before (other host) ms | "
             "before, this session ms | now ms | best now / best before | median now / "
             "median before | shift ms (Hodges-Lehmann) | Mann-Whitney p |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    ratios, medians, tests = {}, {}, {}
    for k in sorted(set().union(*cur_r) & set().union(*pre_r)):
        p, c = [ms(r[k]) for r in pre_r if k in r], [ms(r[k]) for r in cur_r if k in r]
        ratios["/".join(map(str, k))] = min(c) / min(p)
        fmt = lambda xs: " / ".join(f"{x:.2f}" for x in xs)  # noqa: E731
        o = f"{ms(old[k]):.2f}" if k in old else "-"
        med = float(np.median(c) / np.median(p))
        medians["/".join(map(str, k))] = med
        shift, (_, pv) = hodges_lehmann(p, c), mann_whitney(p, c)
        tests["/".join(map(str, k))] = {"shift_ms": shift, "mann_whitney_p": pv}
        lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {o} | {fmt(p)} | {fmt(c)} | "
                     f"{min(c) / min(p):.2f} | {med:.2f} | {shift:+.2f} | {pv:.2f} |")
    geo = math.exp(sum(math.log(x) for x in ratios.values()) / len(ratios))
    geo_med = math.exp(sum(math.log(x) for x in medians.values()) / len(medians))
    return lines, {"ratios": ratios, "geomean": geo, "medians": medians, "geomean_median": geo_med,
                   "tests": tests, "p_below_0_05": sorted(k for k, v in tests.items()
                                                          if v["mann_whitney_p"] < 0.05),
                   "worse_than_1_5": sorted(k for k, v in ratios.items() if v > 1.5),
                   "better_than_0_67": sorted(k for k, v in ratios.items() if v < 1 / 1.5)}


def training_table(pre: list[dict], cur: list[dict]) -> list[str]:
    """Epoch seconds a variant, every run, and the epoch over hydragnn-native's epoch in the
    same run: the native loader does not use MDLoader, so that ratio takes out the load."""
    def by(runs):
        return [{s["variant"]: s for s in r["summary"]} for r in runs]

    def fmt(runs, v, key):
        return " / ".join(f"{r[v][key]:.2f}" if key == "epoch_s" else
                          f"{r[v]['epoch_s'] / r['hydragnn-native']['epoch_s']:.2f}"
                          for r in runs if v in r)

    bp, bc = by(pre), by(cur)
    lines = ["| variant | epoch s before | epoch s now | epoch / native epoch, before | "
             "now | data-wait share before | now |", "|---|---:|---:|---:|---:|---:|---:|"]
    for v in bc[0]:
        if v in bp[0]:
            share = lambda runs: " / ".join(  # noqa: E731
                f"{r[v]['data_wait_share']:.1%}" for r in runs)
            lines.append(f"| {v} | {fmt(bp, v, 'epoch_s')} | {fmt(bc, v, 'epoch_s')} | "
                         f"{fmt(bp, v, 'ratio')} | {fmt(bc, v, 'ratio')} | {share(bp)} | "
                         f"{share(bc)} |")
    return lines


def step_table(step: dict) -> list[str]:
    rows = step["rows"]
    lines = ["| N | B | full index us | compact us (K) | order torch us/step | order feistel "
             "us/step | torch epoch start ms | feistel first plan ms |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in sorted({r["N"] for r in rows}):
        for b in sorted({r["B"] for r in rows if r["N"] == n}):
            got = {(r["what"], r["kind"]): r["us_per_step"] for r in rows
                   if r["N"] == n and r["B"] == b}
            first = {r["kind"]: r["first_plan_us"] / 1e3 for r in rows
                     if r["N"] == n and r["B"] == b and r["what"] == "plan"}
            k = "compact K=1" if n <= (1 << 22) else "compact K=64"
            extra = f"; K=64: {got[('index lookup', 'compact K=64')]:.0f}" \
                if k == "compact K=1" and ("index lookup", "compact K=64") in got else ""
            lines.append(f"| {n:,} | {b} | {got[('index lookup', 'full')]:.0f} | "
                         f"{got[('index lookup', k)]:.0f} ({k[-4:].strip()}{extra}) | "
                         f"{got[('plan', 'torch')]:.0f} | {got[('plan', 'feistel')]:.0f} | "
                         f"{first['torch']:.1f} | {first['feistel']:.1f} |")
    return lines


def ab_tables(folder: Path) -> tuple[list[str], dict]:
    """The ABBA re-check: every run's step median a cell and tree (run order kept), best and
    median ratios, and the store-side CPU of a collective step in each tree."""
    runs = {t: sorted(folder.glob(f"{t}_*.json"), key=lambda p: int(p.stem.split("_")[1]))
            for t in ("pre", "cur")}
    data = {t: [json.loads(p.read_text()) for p in ps] for t, ps in runs.items()}
    order = sorted((int(p.stem.split("_")[1]), t, d) for t in data
                   for p, d in zip(runs[t], data[t]))
    loads = "; ".join(f"{i}:{t} {d['machine']['date'][11:16]} load "
                      f"{d['machine']['loadavg_start'][0]}->{d['machine']['loadavg_end'][0]}"
                      for i, t, d in order)
    ms = {t: {} for t in data}
    for t in data:
        for d in data[t]:
            for r in d["rows"]:
                ms[t].setdefault((r["dataset"], r["ranks"], r["batch"], r["loader"]),
                                 []).append(r["step_median_s"] * 1e3)
    lines = [f"Runs in ABBA order (run:tree, UTC, load 1-min average at start->end): {loads}.",
             "", "| data set | P | B | backend | before ms (run order) | now ms | best now / "
             "best before | median now / median before | shift ms (Hodges-Lehmann) | "
             "Mann-Whitney p |", "|---|---:|---:|---|---|---|---:|---:|---:|---:|"]
    out = {"loaders": {}, "runs": {t: len(data[t]) for t in data},
           "pss_every": sorted({str(d.get("pss_every", "1 (harness before 2026-12-04)"))
                                for t in data for d in data[t]})}
    for k in sorted(ms["cur"]):
        p, c = ms["pre"][k], ms["cur"][k]
        best, med = min(c) / min(p), float(np.median(c) / np.median(p))
        shift, (u, pv) = hodges_lehmann(p, c), mann_whitney(p, c)
        out["loaders"]["/".join(map(str, k))] = {"pre_ms": p, "cur_ms": c, "best_ratio": best,
                                                  "median_ratio": med, "shift_ms": shift,
                                                  "mann_whitney_u": u, "mann_whitney_p": pv}
        lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | "
                     f"{' / '.join(f'{x:.2f}' for x in p)} | {' / '.join(f'{x:.2f}' for x in c)} "
                     f"| {best:.2f} | {med:.2f} | {shift:+.2f} | {pv:.2f} |")
    cpu = {}
    for p in sorted(folder.glob("cpu*_*.json")):
        d = json.loads(p.read_text())
        cpu.setdefault((d["graphs"], p.stem.split("_")[1]), []).append(
            (d["us_per_step"], d["loadavg"][0]))
    if cpu:
        lines += ["", "Store-side CPU of one collective step without MPI (`bench/collective_step_"
                  "cpu.py`: sizes, owners, offsets, grouping and gathering of a P = 4, B = 4 plan "
                  "on a rank; process CPU time, median of 7 rounds of 5,000 steps a run; trees "
                  "alternated, 4 runs each):", "",
                  "| samples | before us/step (runs) | now us/step (runs) | median now / "
                  "median before | load |", "|---:|---|---|---:|---|"]
        for g in sorted({g for g, _ in cpu}):
            p, c = cpu[(g, "pre")], cpu[(g, "cur")]
            med = float(np.median([x for x, _ in c]) / np.median([x for x, _ in p]))
            out.setdefault("cpu", {})[str(g)] = {"pre_us": [x for x, _ in p],
                                                 "cur_us": [x for x, _ in c], "median_ratio": med}
            lines.append(f"| {g:,} | {' / '.join(f'{x:.0f}' for x, _ in p)} | "
                         f"{' / '.join(f'{x:.0f}' for x, _ in c)} | {med:.2f} | "
                         f"{min(l for _, l in p + c):.1f}-{max(l for _, l in p + c):.1f} |")
    parts = {t: [json.loads(q.read_text()) for q in sorted(folder.glob(f"sc_{t}_*.json"))]
             for t in ("pre", "cur")}
    if parts["pre"] and parts["cur"]:  # bench/scale/step_cpu_parts.py runs of each tree
        lds = [r["load"] for t in parts for r in parts[t]]
        lines += ["", "Parts of a one-sided step without MPI (`bench/scale/step_cpu_parts.py`: "
                  "P = 4, B = 4 plans, rank 0's ids; median of 5 rounds a run; `index cold` is the "
                  "lookup right after a `smaps_rollup` read, as the harness does between steps; "
                  f"trees alternated, load {min(lds):.1f}-{max(lds):.1f}):", "",
                  "| part | before us/step (runs) | now us/step (runs) | shift us "
                  "(Hodges-Lehmann) | Mann-Whitney p |", "|---|---|---|---:|---:|"]
        for part in ("plan", "index", "index_cold", "gather", "collate"):
            a, b = ([r[part] for r in parts[t]] for t in ("pre", "cur"))
            sh, (_, pv) = hodges_lehmann(a, b), mann_whitney(a, b)
            out.setdefault("parts", {})[part] = {"pre_us": a, "cur_us": b, "shift_us": sh,
                                                 "mann_whitney_p": pv}
            lines.append(f"| {part.replace('_', ' ')} | {' / '.join(f'{x:.1f}' for x in a)} | "
                         f"{' / '.join(f'{x:.1f}' for x in b)} | {sh:+.1f} | {pv:.2f} |")
    sw = {k: [json.loads(q.read_text()) for q in sorted(folder.glob(f"{k}_*.json"))]
          for k in ("numpy", "small")}
    if sw["numpy"] and sw["small"]:  # this tree with --onesided-numpy and without, alternated
        ms_of = lambda runs: [  # noqa: E731
            r["step_median_s"] * 1e3 for d in runs for r in d["rows"]]
        a, b = ms_of(sw["numpy"]), ms_of(sw["small"])
        out["switch"] = {"numpy_ms": a, "small_ms": b, "shift_ms": hodges_lehmann(a, b)}
        lines += ["", "The current tree's one-sided path switched (`bench/loaders/compare.py "
                  "--onesided-numpy`, the numpy planning of every step as before 7192f42, "
                  "against the default small-step path; same harness, alternated, "
                  f"{_load_note(sw['numpy'] + sw['small'])}): numpy path "
                  f"{' / '.join(f'{x:.2f}' for x in a)} ms, small-step path "
                  f"{' / '.join(f'{x:.2f}' for x in b)} ms (shift {hodges_lehmann(a, b):+.2f} ms)."]
    return lines, out


def main_ab(folder: str, out: str, title: str | None = None) -> None:
    lines, summary = ab_tables(Path(folder))
    n = summary["runs"]
    md = [f"### {title or 'Before/after the compact index: the two 4-rank cells re-checked'} "
          "(ABBA, "
          f"{n['pre']} runs before, {n['cur']} now)", ""] + lines
    tp, tc = ([json.loads(p.read_text()) for p in sorted(Path(folder).glob(f"train_{t}_*.json"))]
              for t in ("pre", "cur"))
    if tp and tc:  # bench/loaders/training.py runs of each tree in ABBA order
    # (train_<tree>_<i>.json)
        md += ["",
            f"HydraGNN training re-checked (`bench/loaders/training.py --ranks {tc[0]['ranks']} "
                   f"--graphs {tc[0]['graphs']} --epochs {tc[0]['epochs']} --variants "
                   f"mdloader-collective,hydragnn-native`, ABBA; before {_load_note(tp)}, now "
                   f"{_load_note(tc)}):", ""] + training_table(tp, tc)
        summary["training"] = {"pre": [t["summary"] for t in tp], "cur": [t["summary"] for t in tc]}
    Path(out + "_ab.json").write_text(json.dumps(summary, indent=1))
    Path(out + "_ab.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ab", help="folder of the ABBA re-check (see the module doc)")
    ap.add_argument("--title", help="heading of the --ab table")
    ap.add_argument("--pre")
    ap.add_argument("--cur")
    ap.add_argument("--train-pre")
    ap.add_argument("--train-cur")
    ap.add_argument("--step")
    ap.add_argument("--out", default=str(HERE / "results" / "scale_regression"))
    a = ap.parse_args()
    if a.ab:
        return main_ab(a.ab, a.out, a.title)
    if not (a.pre and a.cur):
        ap.error("--pre and --cur are needed (or --ab)")
    load = lambda s: [json.loads(Path(p).read_text()) for p in s.split(",")]  # noqa: E731
    when = lambda d: d["machine"]["date"]  # noqa: E731
    pre, cur = sorted(load(a.pre), key=when), sorted(load(a.cur), key=when)
    table, summary = loaders_table(pre, cur)
    md = ["### Before/after the compact index: loaders (reduced grid, MDLoader backends, step "
          "median)", "",
          f"Runs alternated before/now under the bench lock: before {_load_note(pre)}; now "
          f"{_load_note(cur)} (UTC; 2 shared cores, others' jobs running). Geometric mean of "
          f"best-now / best-before over {len(summary['ratios'])} cells: "
          f"**{summary['geomean']:.2f}** (of the medians: {summary['geomean_median']:.2f}); "
          f"cells with a Mann-Whitney p < 0.05 over the runs: "
          f"{', '.join(summary['p_below_0_05']) or 'none'}. {_harness_note(cur)}", ""] + table
    out = {"loaders": summary, "pre_dates": [d["machine"] for d in pre],
           "cur_dates": [d["machine"] for d in cur]}
    if a.train_pre and a.train_cur:
        tp, tc = load(a.train_pre), load(a.train_cur)
        md += ["",
            "### Before/after the compact index: HydraGNN training (`bench/loaders/training.py`, "
               f"reduced: "
                   f"{tc[0]['ranks']} ranks, {tc[0]['graphs']} graphs, {tc[0]['epochs']} epochs; "
                   f"before {_load_note(tp)}, now {_load_note(tc)})", ""] + \
            training_table(tp, tc)
        out["training"] = {"pre": [t["summary"] for t in tp], "cur": [t["summary"] for t in tc]}
    if a.step:
        st = load(a.step)[0]
        md += ["", f"### Per-step cost of the index and the order (`bench/scale/step.py`, one "
                   f"process, kinds interleaved over {st['rounds']} rounds, medians; load "
                   f"{st['loadavg_start'][0]}->{st['loadavg_end'][0]})", "",
               "Index: `nbytes`, `offsets` and `owner_of` of a rank's B ids a step (the "
               "collective backend asks again for the ~B ids it sends). Order: `plan(epoch, "
               "step)` a step, runs of plans included (P = 4); a torch order makes its list at the "
               "epoch's first plan (epoch start).", ""] + step_table(st)
        out["step"] = st
    Path(a.out + ".json").write_text(json.dumps(out, indent=1))
    Path(a.out + ".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
