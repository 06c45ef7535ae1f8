"""Least-squares fits of cost-model parameters to micro-benchmark timings (pure numpy/scipy).

Timings span four orders of magnitude (a 2 µs flush, a 20 ms bulk exchange), so the fit
minimises *relative* error (every row divided by its measured time) and keeps every
parameter non-negative (NNLS, greedy active set): a negative latency would be a better fit and a
worse model. Columns the data cannot identify (all zero, e.g. inter-node terms on one node) come
back as ``None`` so the caller can fill them from another measurement and say so in the profile.

Bounds: a coefficient may be given a floor (``lower``): a per-byte cost of at least
``1 / (plausible bandwidth)``. Without one, a fit that puts a slow link's time into the latency
columns returns a per-byte cost near zero, i.e. a bandwidth far above the link's (measured:
518 MB/s fitted on a 62.5 MB/s link). Every fit reports its relative residuals (rms, worst
point), and :data:`POOR_FIT` is the rms above which the caller warns.
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
    rel_worst: float = 0.0  # largest |fitted / measured - 1|
    worst_row: int = 0
    bounded: tuple[str, ...] = ()  # columns held at their floor

    @property
    def poor(self) -> bool:
        return self.rel_rms > POOR_FIT


POOR_FIT = 0.30  # relative rms above which a fit is reported as poor


def nnls_relative(columns: dict[str, np.ndarray], y: np.ndarray,
                  lower: dict[str, float] | None = None,
                  fixed: dict[str, float] | None = None) -> Fit:
    """Fit ``y ~ sum_j c_j * columns[j]`` with ``c_j >= lower.get(j, 0)`` minimising relative
    error (a floor is met by fitting ``c_j - floor >= 0`` on ``y - floor * column``). Columns in
    `fixed` keep the given coefficient (measured apart): their share is subtracted from ``y``
    and the others are fitted to the rest, still weighted by the whole ``y``."""
    y = np.asarray(y, dtype=np.float64)
    if np.any(y <= 0):
        raise ValueError("fit needs positive times")
    if fixed:
        if lower:
            raise ValueError("fixed and lower columns cannot be combined")
        known = sum(c * np.asarray(columns[k], dtype=np.float64) for k, c in fixed.items())
        fit = _nnls_weighted({k: v for k, v in columns.items() if k not in fixed}, y - known,
                             1.0 / y)
        return _quality(columns, y, {k: fit.get(k, fixed.get(k)) for k in columns}, ())
    free = _quality(columns, y, _nnls_weighted(columns, y, 1.0 / y), ())
    lower = {k: v for k, v in (lower or {}).items()
             if v > 0 and free.coef.get(k) is not None and free.coef[k] < v}
    if not lower:
        return free  # no floor binds (or its column was all zero)
    base = sum(lower[k] * np.asarray(columns[k], dtype=np.float64) for k in lower)
    fit = _nnls_weighted(columns, y - base, 1.0 / y)
    coef = {k: None if c is None else c + lower.get(k, 0.0) for k, c in fit.items()}
    return _quality(columns, y, coef, tuple(sorted(lower)))


def lad_relative(columns: dict[str, np.ndarray], y: np.ndarray,
                 lower: dict[str, float] | None = None, iters: int = 50) -> Fit:
    """As :func:`nnls_relative` but minimising the sum of *absolute* relative errors
    (iteratively reweighted least squares): one outlying row moves the fit far less, and with
    one column the fit is the (weighted) median ratio. For a few rows that measure the same
    thing, where one may be off by 2x (a communicator size whose traffic a machine happens to
    carry faster)."""
    y = np.asarray(y, dtype=np.float64)
    if np.any(y <= 0):
        raise ValueError("fit needs positive times")

    def irls(target: np.ndarray) -> dict[str, float | None]:
        w = 1.0 / y
        coef = _nnls_weighted(columns, target, w)
        for _ in range(iters):
            pred = sum((c or 0.0) * np.asarray(columns[k], dtype=np.float64)
                       for k, c in coef.items())
            r = np.abs(pred - target) / y
            w = 1.0 / (y * np.sqrt(np.maximum(r, 1e-6)))
            new = _nnls_weighted(columns, target, w)
            if all(abs((a or 0.0) - (b or 0.0)) <= 1e-12 * abs(a or 1.0)
                   for a, b in zip(coef.values(), new.values())):
                break
            coef = new
        return coef

    free = irls(y)
    floors = {k: v for k, v in (lower or {}).items()
              if v > 0 and free.get(k) is not None and free[k] < v}
    if not floors:
        return _quality(columns, y, free, ())
    base = sum(floors[k] * np.asarray(columns[k], dtype=np.float64) for k in floors)
    fit = irls(y - base)
    coef = {k: None if c is None else c + floors.get(k, 0.0) for k, c in fit.items()}
    return _quality(columns, y, coef, tuple(sorted(floors)))


def _nnls_weighted(columns: dict[str, np.ndarray], y: np.ndarray,
                   w: np.ndarray) -> dict[str, float | None]:
    names = list(columns)
    A = np.column_stack([np.asarray(columns[n], dtype=np.float64) for n in names])
    if A.shape[0] != y.size or y.size == 0:
        raise ValueError(f"fit needs one time per row: {A.shape[0]} rows, {y.size} times")
    live = np.flatnonzero(np.any(A != 0, axis=0))
    scale = np.abs(A[:, live]).max(axis=0)  # column scaling for conditioning
    sol = _nnls(A[:, live] / scale * w[:, None], y * w)
    coef: dict[str, float | None] = {n: None for n in names}
    for j, c in zip(live, sol / scale):
        coef[names[j]] = float(c)
    return coef


def _quality(columns: dict[str, np.ndarray], y: np.ndarray, coef: dict, bounded: tuple) -> Fit:
    pred = sum((c or 0.0) * np.asarray(columns[k], dtype=np.float64) for k, c in coef.items())
    rel = pred / y - 1.0
    worst = int(np.argmax(np.abs(rel)))
    return Fit(coef, float(np.sqrt(np.mean(rel ** 2))), int(y.size), float(abs(rel[worst])),
               worst, bounded)


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
