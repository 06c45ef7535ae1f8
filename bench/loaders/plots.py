"""Figures of the loader, training and scale benchmarks (PNG, matplotlib Agg)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

STYLE = {  # loader -> (colour, marker, label)
    "auto": ("black", "o", "MDLoader auto"),
    "collective": ("tab:blue", "s", "MDLoader collective"),
    "onesided": ("tab:cyan", "^", "MDLoader onesided"),
    "ddstore": ("tab:red", "v", "DDStore-style lock/Get/unlock"),
    "ddstore-real": ("darkred", "<", "real DDStore, MPI method"),
    "ddstore-real-fabric": ("salmon", ">", "real DDStore, libfabric method"),
    "file": ("tab:orange", "D", "file-per-sample (HydraGNN AdiosDataset)"),
    "preload": ("tab:green", "P", "full preload"),
    "pyg-local": ("tab:purple", "X", "PyG DataLoader, local list"),
}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def loader_figures(result: dict, outdir: Path) -> list[Path]:
    rows = result["rows"]
    paths = [_dataset_figure(rows, ds, outdir / f"loaders_{ds}.png", result["machine"])
             for ds in sorted({r["dataset"] for r in rows})]
    paths.append(_memory_figure(rows, outdir / "loaders_memory.png"))
    return paths


def _dataset_figure(rows, ds, path: Path, mach: dict) -> Path:
    plt = _plt()
    ranks = sorted({r["ranks"] for r in rows if r["dataset"] == ds})
    fig, axes = plt.subplots(len(ranks), 3, figsize=(14, 3.6 * len(ranks)), squeeze=False)
    for i, p in enumerate(ranks):
        sel = [r for r in rows if r["dataset"] == ds and r["ranks"] == p]
        batches = sorted({r["batch"] for r in sel})
        for name, (color, marker, label) in STYLE.items():
            rs = sorted((r for r in sel if r["loader"] == name), key=lambda r: r["batch"])
            if not rs:
                continue
            b = [r["batch"] for r in rs]
            med = np.array([r["step_median_s"] for r in rs])
            p95 = np.array([r["step_p95_s"] for r in rs])
            axes[i, 0].errorbar(b, med * 1e3, yerr=[np.zeros_like(med), (p95 - med) * 1e3],
                                color=color, marker=marker, label=label, capsize=3)
            axes[i, 1].plot(b, [r["samples_per_s"] for r in rs], color=color, marker=marker)
            fo = [(r["batch"], r["fetch_over_floor"]) for r in rs if r["fetch_over_floor"]]
            if fo:
                axes[i, 2].plot(*zip(*fo), color=color, marker=marker)
        floor = sorted({(r["batch"], r["floor_s"]) for r in sel if r["loader"] == "auto"})
        axes[i, 0].plot([f[0] for f in floor], [f[1] * 1e3 for f in floor], "k:",
                        label="memcpy floor (1 core)")
        axes[i, 2].axhline(3.0, color="grey", ls="--", lw=1, label="3x floor (target, fetch)")
        for ax, yl in zip(axes[i], ("step time to a collated batch, ms\n(median, bar to p95)",
                                    "samples/s (all ranks)",
                                    "fetch time / memcpy floor\n(bytes into the rank only)")):
            ax.set(xscale="log", yscale="log", xlabel="batch size per rank", ylabel=yl,
                   title=f"{ds}-like, {p} ranks")
            ax.set_xticks(batches, [str(x) for x in batches])
    axes[0, 0].legend(fontsize=7)
    axes[0, 2].legend(fontsize=7)
    fig.suptitle(f"Loaders side by side, {ds}-like data ({mach['cores']} shared cores, "
                 f"{mach['date']}; ranks oversubscribed, load avg {mach['loadavg_start'][0]})",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _memory_figure(rows, path: Path) -> Path:
    plt = _plt()
    sets = sorted({r["dataset"] for r in rows})
    fig, axes = plt.subplots(1, len(sets), figsize=(6.5 * len(sets), 4), squeeze=False)
    for ax, ds in zip(axes[0], sets):
        sel = [r for r in rows if r["dataset"] == ds]
        ranks = sorted({r["ranks"] for r in sel})
        width = 0.8 / len(STYLE)
        for j, (name, (color, _, label)) in enumerate(STYLE.items()):
            vals = [max((r["data_pss_mib"] for r in sel if r["ranks"] == p and r["loader"] == name),
                        default=0.0) for p in ranks]
            ax.bar(np.arange(len(ranks)) + j * width, vals, width, color=color, label=label)
        d = sel[0]["dataset_bytes"] / 2**20
        ax.plot(np.arange(len(ranks)) + 0.4, [1.15 * d / p + 64 for p in ranks], "k_",
                markersize=40, mew=2, label="target 1.15 x data/ranks + 64 MiB")
        ax.set_xticks(np.arange(len(ranks)) + 0.4, [f"{p} ranks" for p in ranks])
        ax.set(ylabel="per-rank memory above baseline, MiB (peak PSS)",
               title=f"{ds}-like, data set {d:.0f} MiB")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
