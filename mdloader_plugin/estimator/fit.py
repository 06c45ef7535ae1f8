"""Least-squares fits of cost-model parameters to micro-benchmark timings (pure numpy/scipy).

Timings span four orders of magnitude (a 2 µs flush, a 20 ms bulk exchange), so the fit
minimises *relative* error (every row divided by its measured time) and keeps every
parameter non-negative (NNLS, greedy active set): a negative latency would be a better fit and a worse model.
Columns the data cannot identify (all zero, e.g. inter-node terms on one node) come back as
``None`` so the caller can fill them from another measurement and say so in the profile.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Fit:
    """Fitted coefficients by column name (``None``: not identifiable) and the fit quality."""

    coef: dict[str, float | None]
    rel_rms: float  # root-mean-square relative error of the fitted times
    rows: int


def nnls_relative(columns: dict[str, np.ndarray], y: np.ndarray) -> Fit:
    """Fit ``y ~ sum_j c_j * columns[j]`` with ``c_j >= 0`` minimising relative error."""
    y = np.asarray(y, dtype=np.float64)
    names = list(columns)
    A = np.column_stack([np.asarray(columns[n], dtype=np.float64) for n in names])
    if A.shape[0] != y.size or y.size == 0:
        raise ValueError(f"fit needs one time per row: {A.shape[0]} rows, {y.size} times")
    if np.any(y <= 0):
        raise ValueError("fit needs positive times")
    live = np.flatnonzero(np.any(A != 0, axis=0))
    scale = np.abs(A[:, live]).max(axis=0)  # column scaling for conditioning
    w = 1.0 / y
    sol = _nnls(A[:, live] / scale * w[:, None], np.ones_like(y))
    coef: dict[str, float | None] = {n: None for n in names}
    for j, c in zip(live, sol / scale):
        coef[names[j]] = float(c)
    pred = A[:, live] @ (sol / scale)
    return Fit(coef, float(np.sqrt(np.mean((pred / y - 1.0) ** 2))), int(y.size))


def _nnls(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Non-negative least squares for a handful of columns: solve on the active set, drop the
    most negative coefficient, repeat (no scipy: importing it costs seconds on every rank)."""
    active = list(range(A.shape[1]))
    x = np.zeros(A.shape[1])
    while active:
        sol = np.linalg.lstsq(A[:, active], b, rcond=None)[0]
        if sol.min() >= 0:
            x[active] = sol
            break
        active.pop(int(np.argmin(sol)))
    return x


def positive(value: float | None, floor: float) -> float:
    """A fitted value usable in a profile: at least `floor` (NNLS may return exactly 0)."""
    return max(float(value or 0.0), floor)
