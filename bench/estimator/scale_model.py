"""Scale on paper: the estimator's predicted per-step fetch time for 64..2048 ranks (MODEL OUTPUT).

Nothing here runs on a cluster: the cost models of ``mdloader_plugin.estimator`` are evaluated
with the ``perlmutter`` profile (published figures, 4 ranks a node; see its ``source`` fields) for
HydraGNN-like and OC20-like record sizes (mean/std measured on the bench's synthetic sets, or the
defaults below when they are absent) and batch sizes 4, 32, 256. ``auto`` is the model's pick (the
smaller of the two). The figure and JSON say "model output" wherever a number appears.

    python -m bench.estimator.scale_model [--profile perlmutter]

Writes ``bench/results/scale_perlmutter.json`` and ``bench/scale_perlmutter.png``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.harness import BENCH as HERE, record

RANKS = [64, 128, 256, 512, 1024, 2048]
BATCHES = [4, 32, 256]
RECORDS = {"hydragnn": (4700.0, 2300.0), "oc20": (67000.0, 40000.0)}  # mean, std bytes


def record_sizes() -> dict[str, tuple[float, float]]:
    """Mean/std record bytes from the loader benchmark's data sets when it has run."""
    out = dict(RECORDS)
    path = HERE / "results" / "loaders.json"
    if path.exists():
        for r in json.loads(path.read_text())["rows"]:
            out[r["dataset"]] = (r["mean_record_bytes"], out[r["dataset"]][1])
    return out


def predict(profile_name: str) -> dict:
    from mdloader_plugin.estimator import Workload, get_profile, predict_all

    prof = get_profile(profile_name)
    rpn = int(prof.provenance.get("ranks_per_node", 4))
    rows = []
    for ds, (mean, std) in record_sizes().items():
        for b in BATCHES:
            for p in RANKS:
                pred = predict_all(Workload(p, b, mean, std, rpn), prof.params)
                best = min(sorted(pred), key=pred.__getitem__)
                rows.append({"dataset": ds, "ranks": p, "batch": b, "mean_record_bytes": mean,
                             "predicted_s": pred, "auto": best, "auto_s": pred[best],
                             "predicted_samples_per_s": p * b / pred[best]})
    return {"kind": "MODEL OUTPUT (estimator cost models; not measured)",
            "profile": prof.name, "profile_description": prof.description,
            "ranks_per_node": rpn, "rows": rows}


def figure(result: dict, path: Path) -> Path:
    from bench.loaders.plots import _plt

    plt = _plt()
    sets = sorted({r["dataset"] for r in result["rows"]})
    fig, axes = plt.subplots(1, len(sets), figsize=(6.5 * len(sets), 4.4), squeeze=False)
    colors = dict(zip(BATCHES, ("tab:green", "tab:blue", "tab:red")))
    for ax, ds in zip(axes[0], sets):
        for b in BATCHES:
            rs = [r for r in result["rows"] if r["dataset"] == ds and r["batch"] == b]
            x = [r["ranks"] for r in rs]
            for backend, ls in (("onesided", ":"), ("collective", "--")):
                ax.plot(x, [r["predicted_s"][backend] * 1e3 for r in rs], ls=ls,
                        color=colors[b], lw=1, label=f"B={b} {backend}")
            ax.plot(x, [r["auto_s"] * 1e3 for r in rs], "o-", color=colors[b], lw=2,
                    label=f"B={b} auto (model's pick)")
        mean = next(r["mean_record_bytes"] for r in result["rows"] if r["dataset"] == ds)
        ax.set(xscale="log", yscale="log", xlabel="ranks (4 a node)",
               ylabel="predicted fetch time per step, ms",
               title=f"MODEL OUTPUT: {ds}-like records ({mean / 1e3:.1f} KB), "
                     f"{result['profile']} profile")
        ax.set_xticks(RANKS, [str(p) for p in RANKS])
        ax.legend(fontsize=6, ncol=2)
    fig.suptitle("Scale on paper: estimator predictions, not measurements", fontsize=10,
                 color="darkred")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="perlmutter")
    a = ap.parse_args()
    result = predict(a.profile)
    result["record"] = record(a)
    out = HERE / "results" / f"scale_{a.profile}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    fig = figure(result, HERE / f"scale_{a.profile}.png")
    print(f"wrote {out}, {fig} (model output)")


if __name__ == "__main__":
    main()
