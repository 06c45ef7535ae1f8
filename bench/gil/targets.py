"""The GIL-free producer's targets in one command: producer CPU a step (GIL-held / GIL-free) and
the trainer stand-in's data-wait at 1 and 2 ms steps, compiled kernels against the numpy path.

    python -m bench.gil.targets [--steps 200] [--repeats 2] [--rounds 3] [--ranks 1,2]

Runs ``bench/gil/producer_cost.py --kernels auto,off`` (thread CPU time, robust to other jobs'
load) and ``bench/gpu/rate.py`` at 1 and 2 ms steps with ``MDLOADER_KERNELS=auto`` and ``off`` (one
``mpiexec`` job a setting and rank count; the thread producer; the process producer, removed
since, and the hand-off before today's are in the results of 2026-12-06), then
``bench/report.py``. JSON: ``bench/results/producer_cost.json``,
``gpu_rate_gilfree.json``, ``gpu_rate_gilfree_numpy.json``; section "A producer that does not
need the trainer's GIL" in ``bench/RESULTS.md``. Targets (one rank, stand-in trainer, 25 %
GIL-held): data-wait <= 2 % at 1 ms and <= 1 % at 2 ms for molecules batch 32/128 and OC20-like
batch 8/32; GIL-held CPU a batch <= 0.25 ms. Data-wait is wall-clock: read it with the load
average the tables state.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from bench.harness import BENCH, RESULTS, ROOT, module
CASES = (("hydragnn", 32), ("hydragnn", 128), ("oc20", 8), ("oc20", 32))
TARGET = {1.0: 2.0, 2.0: 1.0}  # step ms -> data-wait % at most (one rank)


def _row(rows: list, ds: str, ranks: int, b: int, loader: str, ms: float) -> dict | None:
    for r in rows:
        if (r["dataset"], r["ranks"], r["batch"], r["loader"], r["step_ms"]) == \
                (ds, ranks, b, loader, ms):
            return r
    return None


def _wait(rows: list, ds: str, ranks: int, b: int, loader: str, ms: float):
    r = _row(rows, ds, ranks, b, loader, ms)
    return None if r is None else 100 * r["wait_share_max"]


def _pace(result: dict | None, ds: str, ranks: int, b: int, ms: float) -> str:
    """Served samples/s as % of the trainer alone's (``b * ranks`` a measured alone step)."""
    alone = (result or {}).get("trainer_alone_ms") or {}
    r = _row(result["rows"], ds, ranks, b, "onesided", ms) if result else None
    if r is None or f"{ms:g}" not in alone:
        return "–"
    return f"{100 * r['samples_per_s'] * alone[f'{ms:g}'] / 1e3 / (b * ranks):.0f}%"


def tables(cost: dict | None, fast: dict | None, slow: dict | None,
           proc: dict | None = None, queue: dict | None = None) -> list[str]:
    """Markdown for bench/RESULTS.md (`proc`: ``producer_cost_process.json``, the removed
    helper-process producer's CPU left in the trainer's process; `queue`:
    ``gpu_rate_gilfree_queue.json``, the same kernels with the hand-off before, a
    ``queue.Queue`` and the served batch freed inside the next ``next()``)."""
    out = []
    if cost:
        from bench.gil import producer_cost

        out += ["Producer CPU a step (`bench/gil/producer_cost.py --kernels auto,off`):", ""]
        out += producer_cost.tables(cost) + [""]
    if cost and proc:
        out += [f"The helper-process producer (removed since) in the same measure, "
                f"{proc['machine']['date']} (load average {proc['machine']['loadavg_start'][0]}):"
                " CPU a step left in the trainer's process against the thread producer's "
                "GIL-held CPU a step (kernels on in both):", "",
                "| case | thread: GIL-held ms | process: trainer-side GIL-held ms | "
                "process: helper ms |", "|---|---:|---:|---:|"]
        for c, by in proc["cases"].items():
            t, p = cost["cases"].get(c, {}).get("auto"), by.get("auto")
            if t and p:
                helper = p.get("helper_ms")
                out.append(f"| {c} | {t['gil_held_ms']:.3f} | {p['gil_held_ms']:.3f} | "
                           + (f"{helper:.3f} |" if helper is not None else "– |"))
        out.append("")
    if fast:
        m = fast["machine"]
        ranks = sorted({r["ranks"] for r in fast["rows"]})
        alone = fast.get("trainer_alone_ms")  # the trainer's own step, no loader
        cols = [("thread", fast)] + [("thread, Queue hand-off", queue)] * bool(queue) \
            + [("numpy", slow)]
        before = (f"; `thread, Queue hand-off` = the same kernels with the hand-off before "
                  f"({queue['machine']['date']}, load average "
                  f"{queue['machine']['loadavg_start'][0]})" if queue else "")
        out += [f"Data-wait (% of the trainer's wall time, max over ranks) at 1 and 2 ms steps, "
                f"25 % GIL-held; {fast['steps']} steps x {fast['repeats']} interleaved rounds; "
                f"{m['cores']} cores, load average {m['loadavg_start'][0]} at start and "
                f"{m['loadavg_end'][0]} at end ({m['date']}); `thread` = the producer thread "
                "with the compiled kernels, `numpy` = the same with `MDLOADER_KERNELS=off` "
                f"(the path before them){before}. "
                "Target (one rank): <= 2 % at 1 ms, <= 1 % at 2 ms.", "",
                "| data | batch | ranks | " + " | ".join(f"{c} @{ms}" for c, _ in cols
                                                        for ms in (1, 2))
                + " | thread: trainer pace @1 | @2 | numpy: trainer pace @1 | @2" * bool(alone)
                + " | target met (thread) |",
                "|---|---:|---:|" + "---:|" * (2 * len(cols) + 4 * bool(alone)) + "---|"]
        for p in ranks:
            for ds, b in CASES:
                cells, ok = [], []
                for name, src in cols:
                    for ms in (1.0, 2.0):
                        w = _wait(src["rows"], ds, p, b, "onesided", ms) if src else None
                        cells.append("–" if w is None else f"{w:.1f}")
                        if src is fast and w is not None:
                            ok.append(w <= TARGET[ms])
                if alone:
                    cells += [_pace(src, ds, p, b, ms) for src in (fast, slow)
                              for ms in (1.0, 2.0)]
                verdict = ("yes" if all(ok) else "**missed**") if p == 1 and ok else "–"
                out.append(f"| {ds} | {b} | {p} | " + " | ".join(cells) + f" | {verdict} |")
        if alone:
            out += ["", "Trainer pace: samples/s served against what the trainer stand-in "
                    "alone reaches (its measured step, no loader: "
                    + ", ".join(f"{v:.3f} ms @{k} ms" for k, v in alone.items())
                    + "); below 100 % is the trainer's own step slowed by the producer beside "
                    "it (GIL hand-overs, shared caches and cores), which data-wait does not "
                    "count."]
        out.append("")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--no-report", action="store_true", help="skip bench/report.py")
    a = ap.parse_args()
    py, env = sys.executable, dict(os.environ)
    subprocess.run([py, *module("bench.gil.producer_cost"), "--kernels", "auto,off", "--rounds",
                    str(a.rounds), "--steps", str(a.steps)], check=True, env=env, cwd=ROOT)
    for setting, tag in (("auto", "gilfree"), ("off", "gilfree_numpy")):
        subprocess.run([py, *module("bench.gpu.rate"), "--ranks", a.ranks, "--step-ms", "1,2",
                        "--loaders", "onesided", "--steps", str(a.steps),
                        "--repeats", str(a.repeats), "--out",
                        str(RESULTS / f"gpu_rate_{tag}.json"), "--figure",
                        str(BENCH / f"gpu_rate_{tag}.png")],
                       check=True, env={**env, "MDLOADER_KERNELS": setting}, cwd=ROOT)
    if not a.no_report:
        subprocess.run([py, *module("bench.report")], check=True, env=env, cwd=ROOT)


def load(name: str):
    path = RESULTS / name
    return json.loads(path.read_text()) if path.exists() else None


if __name__ == "__main__":
    main()
