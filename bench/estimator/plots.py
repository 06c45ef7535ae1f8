"""Figures of the estimator benchmark: predicted vs measured, and the model's crossover map."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def predicted_vs_measured(result: dict, path: Path) -> None:
    """Log-log scatter of predicted against measured step time, one point a config x backend."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 5))
    for backend, marker in (("onesided", "o"), ("collective", "s")):
        for dist, color in (("hydragnn", "tab:blue"), ("oc20", "tab:orange")):
            cs = [c for c in result["configs"] if c["dist"] == dist]
            x = [c["predicted_s"][backend] for c in cs]
            y = [c["measured_s"][backend] for c in cs]
            ax.scatter(x, y, marker=marker, color=color, alpha=0.7, label=f"{backend}, {dist}")
    lo = min(min(c["predicted_s"].values()) for c in result["configs"]) / 2
    hi = max(max(c["measured_s"].values()) for c in result["configs"]) * 2
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="y = x")
    ax.set(xscale="log", yscale="log", xlabel="predicted s/step", ylabel="measured s/step")
    s = result["summary"]["model"]
    ax.set_title(f"estimator on this machine: right picks {s['right_pick_fraction']:.0%}, "
                 f"regret {s['regret_geomean']:.1%}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def crossover_map(profile, path: Path, mean_bytes: float = 12000, std_bytes: float = 6000) -> None:
    """Which backend the model picks over ranks 4..2048 x batch 1..1024 (model output only)."""
    from mdloader_plugin.estimator import Workload, predict

    plt = _plt()
    ranks = 2 ** np.arange(2, 12)
    batches = 2 ** np.arange(0, 11)
    rpn = int(profile.provenance.get("ranks_per_node", 4))
    ratio = np.array([[predict("collective", Workload(int(P), int(B), mean_bytes, std_bytes, rpn),
                               profile.params)
                       / predict("onesided", Workload(int(P), int(B), mean_bytes, std_bytes, rpn),
                                 profile.params) for P in ranks] for B in batches])
    fig, ax = plt.subplots(figsize=(6.5, 4.8))
    im = ax.pcolormesh(np.arange(ranks.size + 1), np.arange(batches.size + 1), np.log2(ratio),
                       cmap="coolwarm", vmin=-4, vmax=4)
    ax.contour(np.arange(ranks.size) + 0.5, np.arange(batches.size) + 0.5, np.log2(ratio),
               levels=[0], colors="k")
    ax.set_xticks(np.arange(ranks.size) + 0.5, [str(p) for p in ranks], fontsize=7)
    ax.set_yticks(np.arange(batches.size) + 0.5, [str(b) for b in batches], fontsize=7)
    ax.set(xlabel="ranks", ylabel="batch size per rank")
    ax.set_title(f"MODEL OUTPUT ({profile.name} profile, records {mean_bytes / 1e3:.0f} KB): "
                 "red = onesided faster, blue = collective faster", fontsize=8)
    fig.colorbar(im, ax=ax, label="log2(collective / onesided predicted time)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
