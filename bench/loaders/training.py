"""Training-level benchmark: HydraGNN epoch time and data-wait share with each loader (make bench).

One ``mpiexec`` job trains the demo GIN (``recipes/hydragnn/demo.yaml``) on a synthetic
HydraGNN-like set once per loader variant, back to back in the same processes (so Python, torch
and HydraGNN start once): MDLoader ``auto``, ``onesided``, ``collective`` (prefetch 2, as in the
recipe) and HydraGNN's native loader (``loader: hydragnn``: file-per-sample reads through a PyG
DataLoader; ``--full`` adds its ``preload`` mode). Every run uses HydraGNN's own
``train_validate_test`` through ``mdloader train hydragnn``'s driver, same seed, same batches.
The epoch numbers are the driver's ``MDLOADER-EPOCH`` records (wall = slowest rank, data-wait =
mean over ranks of the time the trainer waited in ``next()``); epoch 0 includes warm-up and is
reported but left out of the medians.

    python -m bench.loaders.training [--full] [--ranks 2] [--graphs 2000] [--epochs 3]

Writes ``bench/results/training.json`` and ``bench/training.png``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from bench.harness import BENCH, ROOT, module, record

VARIANTS = {  # name -> --set overrides
    "mdloader-auto": ["loader=mdloader", "mdloader.backend=auto"],
    "mdloader-onesided": ["loader=mdloader", "mdloader.backend=onesided"],
    "mdloader-collective": ["loader=mdloader", "mdloader.backend=collective"],
    "hydragnn-native": ["loader=hydragnn", "hydragnn_loader.preload=false"],
    "hydragnn-preload": ["loader=hydragnn", "hydragnn_loader.preload=true"],
}
QUICK = ("mdloader-auto", "mdloader-onesided", "mdloader-collective", "hydragnn-native")


def worker(variants: list[str], data: str, epochs: int, rounds: int, out: str) -> None:
    from mpi4py import MPI

    from mdloader_plugin.integrations.hydragnn import config, driver

    comm = MPI.COMM_WORLD
    runs = []
    for v in [v for _ in range(rounds) for v in variants]:  # interleaved: noise hits all alike
        sets = VARIANTS[v] + [f"Dataset.path={data}", f"run_name=bench-{v}",  # logs/bench-*
                              f"NeuralNetwork.Training.num_epoch={epochs}"]
        cfg = config.load(ROOT / "recipes" / "hydragnn" / "demo.yaml", sets)
        t0 = time.perf_counter()
        records = driver.train(cfg, comm)
        runs.append({"variant": v, "records": records, "run_s": time.perf_counter() - t0})
        if comm.Get_rank() == 0:
            print(f"  {v}: " + ", ".join(f"{r['wall_s']:.2f} s (wait {r['data_wait_s']:.3f})"
                                          for r in records), flush=True)
    if comm.Get_rank() == 0:
        Path(out).write_text(json.dumps(runs))


def summarise(runs: list[dict]) -> dict:
    """Medians over the steady epochs (1..) of every round of one variant."""
    run = runs[0]
    recs = run["records"]
    steady = [r for x in runs for r in (x["records"][1:] or x["records"])]
    wall = np.median([r["wall_s"] for r in steady])
    wait = np.median([r["data_wait_s"] for r in steady])
    return {"variant": run["variant"], "backend": recs[-1].get("backend", "-"),
            "epochs": len(recs), "epoch_s": float(wall), "data_wait_s": float(wait),
            "data_wait_share": float(wait / wall), "samples_per_s": float(
                np.median([r["samples"] / r["wall_s"] for r in steady])),
            "epoch0_s": recs[0]["wall_s"], "steps": recs[-1]["steps"], "rounds": len(runs),
            "samples": recs[-1]["samples"], "ranks": recs[-1]["ranks"]}


def figure(result: dict, path: Path) -> Path:
    from bench.loaders.plots import _plt

    plt = _plt()
    rows = result["summary"]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    names = [r["variant"] for r in rows]
    wall = np.array([r["epoch_s"] for r in rows])
    wait = np.array([r["data_wait_s"] for r in rows])
    ax.barh(names, wall - wait, color="tab:blue", label="compute (epoch - data wait)")
    ax.barh(names, wait, left=wall - wait, color="tab:red", label="data wait")
    for i, r in enumerate(rows):
        ax.text(wall[i], i, f" {r['data_wait_share']:.1%} wait", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set(xlabel="epoch time, s (median of epochs 1..)",
           title=f"HydraGNN GIN demo, {rows[0]['ranks']} ranks, {rows[0]['samples']} graphs/epoch",
           xlim=(0, wall.max() * 1.3))
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="4 ranks, 4000 graphs, adds preload")
    ap.add_argument("--ranks", type=int)
    ap.add_argument("--graphs", type=int)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rounds", type=int, help="interleaved rounds of all variants (default 1; "
                    "--full 2)")
    ap.add_argument("--variants", help="comma list of " + ",".join(VARIANTS))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a.variants.split(","), a.data, a.epochs, a.rounds or 1, a.tmp)
    import subprocess

    from bench.harness import RESULTS, WORK, machine, mpiexec

    ranks = a.ranks or (4 if a.full else 2)
    rounds = a.rounds or (2 if a.full else 1)
    graphs = a.graphs or (4000 if a.full else 2000)
    variants = a.variants.split(",") if a.variants else list(VARIANTS if a.full else QUICK)
    data = WORK / f"train-{graphs}.bp"
    if not data.exists():
        WORK.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "mdloader_plugin", "synth", "--kind", "hydragnn",
                        "--num-graphs", str(graphs), "--split", "0.8,0.1,0.1", "--out",
                        str(data), "--quiet"], check=True, cwd=ROOT)
    info = machine()
    tmp = RESULTS / ".training.json"
    print(f"training {len(variants)} variants x {rounds} rounds on {ranks} ranks, {graphs} "
          f"graphs, {a.epochs} epochs ...", flush=True)
    mpiexec(ranks, [*module("bench.loaders.training"), "--worker", "--variants",
                    ",".join(variants), "--data", str(data), "--epochs", str(a.epochs),
                        "--rounds", str(rounds), "--tmp", str(tmp)],
            timeout=3600)
    runs = json.loads(tmp.read_text())
    tmp.unlink()
    info["loadavg_end"] = [round(x, 2) for x in __import__("os").getloadavg()]
    result = {"record": record(a), "machine": info, "ranks": ranks, "graphs": graphs,
        "epochs": a.epochs,
              "rounds": rounds, "config": "recipes/hydragnn/demo.yaml", "runs": runs,
              "summary": [summarise([r for r in runs if r["variant"] == v]) for v in variants]}
    out = RESULTS / "training.json"
    out.write_text(json.dumps(result, indent=1))
    fig = figure(result, BENCH / "training.png")
    for s in result["summary"]:
        print(f"  {s['variant']:20s} epoch {s['epoch_s']:.2f} s  data-wait "
              f"{s['data_wait_share']:.1%}")
    print(f"wrote {out}, {fig}")


if __name__ == "__main__":
    main()
