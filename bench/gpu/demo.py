"""The HydraGNN demo on a GPU node (issue 21): turn `tools/gpu_demo.sh`'s epoch lines into
`bench/results/gpu_demo.json` and the table `bench/report.py` prints.

    bash tools/gpu_demo.sh                      # on the GPU node; writes run/gpu-demo/epochs.log
    python -m bench.gpu.demo run/gpu-demo/epochs.log --machine "1x H200, torch 2.11+cu130" \
        --date 2026-12-04

Per run (ranks x loader variant): the median epoch time over its epochs, the data-wait share
(time in `next(loader)` over epoch time, summed over the run's epochs) and the speed-up against
HydraGNN's own loader at the same rank count. One job per variant, run one after another on an
otherwise idle node: no repeat, so differences of a few percent are inside the noise.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from bench.harness import RESULTS, record
from mdloader_plugin.core.epochlog import parse_epoch_lines

RESULT = RESULTS / "gpu_demo.json"
VARIANTS = {"hydragnn": "HydraGNN's own loader", "mdloader-host": "MDLoader, host batches",
            "mdloader-gpu-pinned": "MDLoader, device=auto, pinned",
            "mdloader-gpu-unpinned": "MDLoader, device=auto, not pinned"}


def summarise(records: list[dict]) -> list[dict]:
    runs: dict[str, list[dict]] = {}
    for r in records:
        runs.setdefault(r["run"], []).append(r)
    rows = []
    for run, recs in runs.items():
        ranks = int(recs[0]["ranks"])
        variant = run.split(f"np{ranks}-", 1)[1]
        wall = sum(float(r["wall_s"]) for r in recs)
        rows.append({"run": run, "ranks": ranks, "variant": variant,
                     "backend": recs[0]["backend"], "epochs": len(recs),
                     "epoch_s": statistics.median(float(r["wall_s"]) for r in recs),
                     "data_wait_share": sum(float(r["data_wait_s"]) for r in recs) / wall})
    for row in rows:
        ref = [r for r in rows if r["ranks"] == row["ranks"] and r["variant"] == "hydragnn"]
        row["speedup"] = ref[0]["epoch_s"] / row["epoch_s"] if ref else None
    return sorted(rows, key=lambda r: (r["ranks"], list(VARIANTS).index(r["variant"])
                                       if r["variant"] in VARIANTS else 99))


def table(res: dict) -> list[str]:
    out = [f"{res['machine']}, {res['date']}; {res['setup']}", "",
           "| ranks | loader | backend | median epoch s | data-wait | speed-up vs HydraGNN's |",
           "|---|---|---|---|---|---|"]
    for r in res["rows"]:
        sp = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
        out.append(f"| {r['ranks']} | {VARIANTS.get(r['variant'], r['variant'])} | "
                   f"{r['backend']} | {r['epoch_s']:.2f} | {r['data_wait_share']:.1%} | {sp} |")
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("epochs_log", help="MDLOADER-EPOCH lines (tools/gpu_demo.sh's epochs.log)")
    ap.add_argument("--machine", required=True, help="what it ran on, for the table")
    ap.add_argument("--date", required=True)
    ap.add_argument("--setup", default="HydraGNN 3.0 GIN demo (recipes/hydragnn/demo.yaml), "
                    "10,000 synthetic molecules (8,000 train), batch 32, 3 epochs")
    ap.add_argument("--out", default=str(RESULT))
    a = ap.parse_args(argv)
    rows = summarise(parse_epoch_lines(Path(a.epochs_log).read_text().splitlines()))
    res = {"machine": a.machine, "date": a.date, "setup": a.setup, "rows": rows,
           "record": record(a)}
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print("\n".join(table(res)))


if __name__ == "__main__":
    main()
