"""The figures pages quote about keeping a GPU fed (the H200 node) and the HydraGNN GPU demo
(``FIGURES``: key -> function; merged into ``bench.figures.FIGURES``)."""

from __future__ import annotations

from typing import Callable

from bench.gpu import demo as gpu_demo
from bench.reporting import load as _load, span as _range


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


FIGURES: dict[str, Callable[[], str]] = {
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
}
