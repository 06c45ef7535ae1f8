"""The figures pages quote about data-set scale: index and order per rank (``FIGURES``: key ->
function; merged into ``bench.figures.FIGURES``)."""

from __future__ import annotations

import math
from typing import Callable

from bench.reporting import load as _load


def _scale(config: str) -> dict:
    return next(r for r in _load("dataset_scale.json")["rows"] if r["config"] == config)


def _per_sample(config: str) -> float:
    """Index + order bytes a rank holds (max over ranks) over the data set's samples."""
    r = _scale(config)
    return (r["index_bytes"] + r["order_bytes"]) / r["samples"]


def scale_after_bytes() -> str:
    return f"{_per_sample('after'):.2f} B"


def scale_shared_bytes() -> str:
    return f"{_per_sample('after-shared'):.2f} B"


def scale_before_bytes() -> str:
    return f"{_per_sample('before'):.0f} B"


def scale_after_epoch_start() -> str:
    return f"{_scale('after')['epoch_start_s']:.3f} s"


def scale_before_epoch_start() -> str:
    return f"{_scale('before')['epoch_start_s']:.1f} s"


def scale_feistel_plan_1e9() -> str:
    """One step's feistel plan at N = 10^9, P = 2048, B = 32 (``bench/scale/dataset.py``)."""
    return f"{_load('dataset_scale.json')['feistel_plan_1e9_p2048_s'] * 1000:.0f} ms"


def regression_grid_geo() -> str:
    r = list(_load("scale_regression_grid.json")["loaders"]["ratios"].values())
    return f"{math.exp(sum(math.log(x) for x in r) / len(r)):.2f}x over {len(r)} cells"


FIGURES: dict[str, Callable[[], str]] = {
    "scale.after_bytes": scale_after_bytes,
    "scale.shared_bytes": scale_shared_bytes,
    "scale.before_bytes": scale_before_bytes,
    "scale.after_epoch_start": scale_after_epoch_start,
    "scale.before_epoch_start": scale_before_epoch_start,
    "scale.torch_bytes": lambda: f"{_per_sample('torch'):.2f} B",
    "scale.torch_epoch_start": lambda: f"{_scale('torch')['epoch_start_s']:.1f} s",
    "scale.feistel_plan_1e9": scale_feistel_plan_1e9,
    "regression.grid_geo": regression_grid_geo,
}
