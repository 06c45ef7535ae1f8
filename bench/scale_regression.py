"""Did the scale work (issue 19) slow anything down? Before/after tables from benchmark runs.

The benchmarks the compact index and the scalable order could affect are run twice each, on the
tree before issue 19 (``git archive 82fc212``, the commit before the compact index) and on this
one, alternately, in one session under the bench lock (``flock /work/wt/bench.lock``):
``bench/loaders.py --loaders collective,onesided,auto`` (reduced grid), ``bench/training.py``
(reduced) and ``bench/scale_step.py`` (per-step index and order cost, this tree only: it
interleaves the ``full`` index, which is the representation before issue 19, with the compact
one). The committed figures before issue 19 (``git show 0a94d52:bench/results/loaders.json``)
are listed too, but they come from another host (an Intel Xeon VM; these runs: AMD EPYC), so
only the same-session columns compare.

    python bench/scale_regression.py --pre A.json,B.json --cur C.json,D.json \\
        [--train-pre T.json --train-cur U.json] [--step S.json]

Writes ``bench/results/scale_regression.json`` and ``.md`` (included in RESULTS.md and
docs/scale.md). Per cell the best (smallest) step median of the runs of each tree is compared:
on a shared, loaded machine the best of a few runs is the least contaminated figure.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMMITTED = "0a94d52"  # the last loaders.json before issue 19 landed


def _rows(d: dict) -> dict:
    return {(r["dataset"], r["ranks"], r["batch"], r["loader"]): r for r in d["rows"]}


def _committed() -> dict:
    out = subprocess.run(["git", "show", f"{COMMITTED}:bench/results/loaders.json"],
                         capture_output=True, text=True, cwd=HERE.parent)
    return _rows(json.loads(out.stdout)) if out.returncode == 0 else {}


def _load_note(runs: list[dict]) -> str:
    return "; ".join(f"{r['machine']['date'][11:16]} load {r['machine']['loadavg_start'][0]}"
                     f"->{r['machine']['loadavg_end'][0]}" for r in runs)


def loaders_table(pre: list[dict], cur: list[dict]) -> tuple[list[str], dict]:
    old, pre_r, cur_r = _committed(), [_rows(d) for d in pre], [_rows(d) for d in cur]
    ms = lambda r: r["step_median_s"] * 1e3  # noqa: E731
    lines = ["| data set | P | B | backend | committed before #19 (other host) ms | "
             "before #19, this session ms | now ms | best now / best before |",
             "|---|---:|---:|---|---:|---:|---:|---:|"]
    ratios = {}
    for k in sorted(set(cur_r[0]) & set(pre_r[0])):
        p, c = [ms(r[k]) for r in pre_r if k in r], [ms(r[k]) for r in cur_r if k in r]
        ratios["/".join(map(str, k))] = min(c) / min(p)
        fmt = lambda xs: " / ".join(f"{x:.2f}" for x in xs)  # noqa: E731
        o = f"{ms(old[k]):.2f}" if k in old else "-"
        lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {o} | {fmt(p)} | {fmt(c)} | "
                     f"{min(c) / min(p):.2f} |")
    geo = math.exp(sum(math.log(x) for x in ratios.values()) / len(ratios))
    return lines, {"ratios": ratios, "geomean": geo,
                   "worse_than_1_5": sorted(k for k, v in ratios.items() if v > 1.5),
                   "better_than_0_67": sorted(k for k, v in ratios.items() if v < 1 / 1.5)}


def training_table(pre: dict, cur: dict) -> list[str]:
    b = {s["variant"]: s for s in pre["summary"]}
    lines = ["| variant | epoch s before | epoch s now | now / before | data-wait share "
             "before | now |", "|---|---:|---:|---:|---:|---:|"]
    for s in cur["summary"]:
        p = b.get(s["variant"])
        if p:
            lines.append(f"| {s['variant']} | {p['epoch_s']:.2f} | {s['epoch_s']:.2f} | "
                         f"{s['epoch_s'] / p['epoch_s']:.2f} | {p['data_wait_share']:.1%} | "
                         f"{s['data_wait_share']:.1%} |")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pre", required=True)
    ap.add_argument("--cur", required=True)
    ap.add_argument("--train-pre")
    ap.add_argument("--train-cur")
    ap.add_argument("--step")
    ap.add_argument("--out", default=str(HERE / "results" / "scale_regression"))
    a = ap.parse_args()
    load = lambda s: [json.loads(Path(p).read_text()) for p in s.split(",")]  # noqa: E731
    pre, cur = load(a.pre), load(a.cur)
    table, summary = loaders_table(pre, cur)
    md = ["### Before/after issue 19: loaders (reduced grid, MDLoader backends, step median)", "",
          f"Runs alternated before/now under the bench lock: before {_load_note(pre)}; now "
          f"{_load_note(cur)} (UTC; 2 shared cores, others' jobs running). Geometric mean of "
          f"best-now / best-before over {len(summary['ratios'])} cells: "
          f"**{summary['geomean']:.2f}**.", ""] + table
    out = {"loaders": summary, "pre_dates": [d["machine"] for d in pre],
           "cur_dates": [d["machine"] for d in cur]}
    if a.train_pre and a.train_cur:
        tp, tc = load(a.train_pre)[0], load(a.train_cur)[0]
        md += ["", f"### Before/after issue 19: HydraGNN training (`bench/training.py`, reduced: "
                   f"{tc['ranks']} ranks, {tc['graphs']} graphs, {tc['epochs']} epochs; before "
                   f"{_load_note([tp])}, now {_load_note([tc])})", ""] + training_table(tp, tc)
        out["training"] = {"pre": tp["summary"], "cur": tc["summary"]}
    if a.step:
        st = load(a.step)[0]
        md += ["", f"### Per-step cost of the index and the order (`bench/scale_step.py`, one "
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
