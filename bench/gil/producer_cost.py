"""MDLoader's per-step CPU cost, GIL-held and GIL-free apart, and a before/after A/B.

The producer's work a step (plan, fetch, column-wise batch) is timed inline (``prefetch=0``, one
rank) in *CPU time of the thread* (``time.thread_time``), which other processes on a shared,
loaded machine barely move, unlike wall time. That CPU time a step is what a rank's loader needs
from its core: with a trainer whose Python part holds the GIL for ``g`` ms of a ``s`` ms step on
the same core, the producer keeps up only while its cost stays under ``s - g``. The thread CPU
time spent inside the compiled kernels (:mod:`mdloader_plugin.records.kernels`, which release
the GIL) is summed apart: *GIL-free*; the rest of the step is *GIL-held* (what competes with the
trainer's Python). ``--kernels auto,off`` measures the compiled path and the numpy fallback,
alternated round by round (one subprocess a round and setting), and writes
``bench/results/producer_cost.json`` (``--out``).

    python -m bench.gil.producer_cost [--cases hydragnn:32,hydragnn:128,oc20:8,oc20:32]
        [--steps 200] [--kernels auto,off] [--rounds 3]
    python -m bench.gil.producer_cost --before REV [--rounds 5]   # A/B: REV's tree vs this one,
                                                              # alternated round by round
    python -m bench.gil.producer_cost --producer process  # the helper-process producer (removed
        # since: this measures it in a tree that still has it, PYTHONPATH=that tree): CPU a step
        # left in the trainer's process, and the helper's own, reported apart
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import ROOT, WORK, module, record

MODULE = "bench.gil.producer_cost"
CASES = "hydragnn:32,hydragnn:128,oc20:8,oc20:32"


def _proc_cpu(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(path: str, batch: int, steps: int, producer: str = "thread") -> float:
    """Median over epochs of CPU ms a step (after one warm-up epoch) in the loader's thread;
    with the process producer the helper's CPU ms a step is kept in ``HELPER_MS``, and the
    kernels' (GIL-free) CPU ms a step in ``FREE_MS``."""
    import numpy as np
    import torch
    import torch_geometric.data  # noqa: F401  (imported by any trainer)

    from mdloader_plugin.loader.loader import MDLoader
    from mdloader_plugin.store.shard import ShardStore
    try:
        from mdloader_plugin.records import kernels
    except ImportError:  # an older tree (A/B): no kernels
        kernels = None

    torch.set_num_threads(1)
    timed = kernels.timed() if kernels is not None else None
    store = ShardStore.from_file(None, path)
    per, helper, free = [], [], []
    kw = {} if producer == "thread" else {"producer": producer}  # older trees lack the argument
    with MDLoader(store, batch_size=batch, backend="onesided", prefetch=0, **kw) as ld:
        pid = ld._helper.proc.pid if getattr(ld, "_helper", None) is not None else None
        epoch, done = 0, -len(ld)  # the first epoch warms up
        while done < steps:
            ld.set_epoch(epoch)
            t0, n = time.thread_time(), 0
            h0 = _proc_cpu(pid) if pid else 0.0
            f0 = timed.cpu_s if timed is not None else 0.0
            for _ in ld:
                n += 1
            if done >= 0:
                per.append((time.thread_time() - t0) / n)
                free.append(((timed.cpu_s if timed is not None else 0.0) - f0) / n)
                if pid:
                    helper.append((_proc_cpu(pid) - h0) / n)
            done += n
            epoch += 1
    store.close()
    HELPER_MS[path, batch] = float(np.median(helper)) * 1e3 if helper else None
    FREE_MS[path, batch] = float(np.median(free)) * 1e3
    return float(np.median(per)) * 1e3


HELPER_MS: dict = {}
FREE_MS: dict = {}


def split_rounds(cases: str, steps: int, rounds: int, graphs: dict, settings: list[str],
                 producer: str = "thread") -> dict:
    """``MDLOADER_KERNELS`` = each of `settings`, one subprocess a round and setting,
    alternated; per case and setting the medians over rounds of total, GIL-free and GIL-held
    CPU ms a step."""
    import numpy as np

    runs: dict = {s: [] for s in settings}
    for r in range(rounds):
        for s in (settings if r % 2 == 0 else settings[::-1]):
            cmd = [sys.executable, *module(MODULE), "--cases", cases, "--steps",
                   str(steps), "--json", "--graphs", json.dumps(graphs), "--producer", producer]
            env = {**os.environ, "MDLOADER_KERNELS": s, "PYTHONPATH": str(ROOT)}
            res = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
            if res.returncode:
                raise SystemExit(f"producer_cost round {r} ({s}) failed:\n{res.stderr[-2000:]}")
            runs[s].append(json.loads(res.stdout.splitlines()[-1]))
    out = {}
    for s, rs in runs.items():
        for c in cases.split(","):
            total = float(np.median([x[c]["total_ms"] for x in rs]))
            free = float(np.median([x[c]["free_ms"] for x in rs]))
            out.setdefault(c, {})[s] = {
                "total_ms": total, "gil_free_ms": free,
                "gil_held_ms": float(np.median([x[c]["total_ms"] - x[c]["free_ms"] for x in rs])),
                "helper_ms": rs[0][c].get("helper_ms"), "rounds": [x[c] for x in rs]}
    return out


def tables(res: dict) -> list[str]:
    """Markdown for bench/RESULTS.md."""
    m, rows = res["machine"], res["cases"]
    out = [f"One rank, inline producer (`prefetch=0`), {res['steps']} steps a round, median of "
           f"{res['rounds']} alternated rounds; thread CPU time (robust to other jobs' load; "
           f"load average {m['loadavg_start'][0]} at start, {m['loadavg_end'][0]} at end, "
           f"{m['cores']} cores, {m['date']}). GIL-free: inside the compiled kernels; GIL-held: "
           "the rest of the step (target <= 0.25 ms).", "",
           "| case | kernels | CPU ms a step | GIL-held ms | GIL-free ms | GIL-held <= 0.25 ms |",
           "|---|---|---:|---:|---:|---|"]
    for c, by in rows.items():
        for s, v in by.items():
            ok = "yes" if v["gil_held_ms"] <= 0.25 else "**missed**"
            out.append(f"| {c} | {s} | {v['total_ms']:.3f} | {v['gil_held_ms']:.3f} | "
                       f"{v['gil_free_ms']:.3f} | {ok} |")
    return out


def ab(before: str, cases: str, steps: int, rounds: int, graphs: dict) -> dict:
    """Alternate ``before`` (a git revision, exported) and this tree, ``rounds`` times."""
    with tempfile.TemporaryDirectory(prefix="mdl-before-") as tmp:
        subprocess.run(f"git -C {ROOT} archive {before} | tar -x -C {tmp}", shell=True,
                       check=True)
        trees = {"before": tmp, "after": str(ROOT)}
        out: dict = {k: [] for k in trees}
        for r in range(rounds):
            for name, tree in (trees.items() if r % 2 == 0 else reversed(trees.items())):
                cmd = [sys.executable, *module(MODULE), "--cases", cases,
                       "--steps", str(steps), "--json",
                       "--graphs", json.dumps(graphs)]
                # the tree's package first; bench (a regular package) from this checkout
                env = {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys([tree,
                    str(ROOT)]))}
                res = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True,
                                     check=True)
                out[name].append(json.loads(res.stdout.splitlines()[-1]))
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=CASES, help="dataset:batch list")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--before", help="git revision to compare with (A/B, alternated)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--graphs", default='{"hydragnn": 4096, "oc20": 1024}')
    ap.add_argument("--producer", default="thread", choices=("thread", "process"))
    ap.add_argument("--kernels", help="MDLOADER_KERNELS settings to alternate, e.g. auto,off "
                    "(writes --out, default bench/results/producer_cost.json)")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out")
    a = ap.parse_args()
    graphs = json.loads(a.graphs)
    work = WORK
    if a.before:
        from bench.loaders import compare as lb

        lb.DATASETS.update(graphs)
        lb.make_data(sorted(graphs))
        res = ab(a.before, a.cases, a.steps, a.rounds, graphs)
        import numpy as np

        summary = {c: {k: float(np.median([r[c]["total_ms"] if isinstance(r[c], dict) else r[c]
                                           for r in res[k]])) for k in res}
                   for c in a.cases.split(",")}
        for c, v in summary.items():
            print(f"{c:14s} before {v['before']:.3f} ms  after {v['after']:.3f} ms  "
                  f"({100 * (v['after'] / v['before'] - 1):+.0f}%) CPU a step")
        if a.out:
            Path(a.out).write_text(json.dumps({"before": a.before, "rounds": a.rounds,
                                               "steps": a.steps, "runs": res,
                                               "median_ms": summary, "record": record(a)},
                                              indent=1))
        return
    if a.kernels:
        from bench.loaders import compare as lb

        lb.DATASETS.update(graphs)
        lb.make_data(sorted(graphs))
        info = lb.machine()
        cases = split_rounds(a.cases, a.steps, a.rounds, graphs, a.kernels.split(","),
                             a.producer)
        info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        res = {"record": record(a), "machine": info, "steps": a.steps, "rounds": a.rounds,
            "producer": a.producer,
               "graphs": graphs, "cases": cases}
        out = Path(a.out or lb.RESULTS / (
            f"producer_cost{'' if a.producer == 'thread' else '_' + a.producer}.json"))
        out.write_text(json.dumps(res, indent=1))
        print("\n".join(tables(res)))
        print(f"wrote {out}")
        return
    res = {}
    for case in a.cases.split(","):
        ds, b = case.split(":")
        path = str(work / f"{ds}-{graphs[ds]}.bp")
        total = measure(path, int(b), a.steps, a.producer)
        helper = HELPER_MS.get((path, int(b)))
        res[case] = {"total_ms": total, "free_ms": FREE_MS[path, int(b)], "helper_ms": helper}
        if not a.json:
            print(f"{case:14s} {total:.3f} ms CPU a step in the loader's thread (GIL-free "
                  f"{res[case]['free_ms']:.3f} ms)"
                  + (f", helper process {helper:.3f} ms" if helper is not None else
                     f" ({int(b) / total * 1e3:.0f} samples/s on one free core)"))
    if a.json:
        print(json.dumps(res))


if __name__ == "__main__":
    main()
