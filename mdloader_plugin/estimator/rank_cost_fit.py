"""The collective model's per-rank CPU constants fitted from ``mdloader rank-cost`` rows.

The model prices a rank's step plan a step as ``coll.t_plan_id * B + coll.t_count * P``
(:mod:`.models.collective`): what does not grow with the world (the rank's row and sends, the
index lookups, grouping and packing of its ``B`` ids) and what does (the ``Alltoallv`` count and
displacement arrays, ``P`` entries). ``rank-cost`` measures, for each ``P`` of its ``--ranks``,
the thread CPU of the phases ``plan`` and ``group_pack`` of one rank's real step; their sum is
fitted as ``a + b P`` (non-negative least squares on relative error, as ``calibrate``'s fits,
:func:`.fit.nnls_relative`), so ``coll.t_plan_id = a / B`` and ``coll.t_count = b``. The copy
and batch phases are not in it: the model prices copies by ``mem.*`` and the batch is the
trainer's side. The profile written is the base profile with these two values and their sources
replaced and a ``rank_cost`` entry in its provenance (date, host, the job, the fit's residual).
"""

from __future__ import annotations

import datetime as _dt
import platform
import socket
from dataclasses import replace

import numpy as np

from .. import __version__
from ..core.errors import ConfigError
from .fit import Fit, nnls_relative, positive
from .profile import Profile, validate_params

KEYS = ("coll.t_plan_id", "coll.t_count")
FLOOR_S = 1e-9  # the profile's smallest plausible time (a fitted 0 is held here)


def check_rows_fit(backend: str, ranks: list[int], legacy: bool) -> None:
    """Before any work: the rows of this run can be fitted (one line naming the fix)."""
    if backend != "collective" or legacy:
        raise ConfigError("--profile-out fits the collective backend's coll.t_plan_id and "
                          "coll.t_count of today's code: run with --backend collective (and "
                          "without --legacy)")
    if len(set(ranks)) < 2:
        raise ConfigError(f"--profile-out fits a + b P: give at least two world sizes in "
                          f"--ranks (got {','.join(map(str, ranks))}), e.g. --ranks 64,8192")


def fit_rows(rows: list[dict]) -> tuple[float, float, Fit]:
    """``(coll.t_plan_id, coll.t_count, fit)`` from rank-cost rows of one batch size."""
    p = np.array([r["ranks"] for r in rows], dtype=np.float64)
    b = {r["batch_size"] for r in rows}
    if len(b) != 1:
        raise ConfigError(f"rank-cost rows of several batch sizes {sorted(b)}: fit one at a time")
    y = np.array([r["phases_ms"]["plan"] + r["phases_ms"]["group_pack"] for r in rows]) * 1e-3
    fit = nnls_relative({"per_step": np.ones_like(p), "per_rank": p}, np.maximum(y, FLOOR_S))
    batch = b.pop()
    return (positive((fit.coef["per_step"] or 0.0) / batch, FLOOR_S),
            positive(fit.coef["per_rank"], FLOOR_S), fit)


def profile_from_rows(base: Profile, rows: list[dict], job: dict) -> Profile:
    """`base` with ``coll.t_plan_id`` and ``coll.t_count`` fitted from `rows` (sourced, with
    the run's provenance); `job`: the rank-cost options to record."""
    t_id, t_count, fit = fit_rows(rows)
    ranks = ",".join(str(r["ranks"]) for r in rows)
    said = (f"rank-cost: plan + group_pack CPU a step = a + b P over P = {ranks} "
            f"(B = {rows[0]['batch_size']}, N = {rows[0]['num_samples']}), relative rms "
            f"{fit.rel_rms:.0%}")
    params = {**base.params, "coll.t_plan_id": t_id, "coll.t_count": t_count}
    validate_params(params, "rank-cost fit")
    sources = {**base.sources, "coll.t_plan_id": f"{said}: a / B",
               "coll.t_count": f"{said}: b"}
    prov = {**base.provenance, "rank_cost": {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(), "python": platform.python_version(),
        "mdloader": __version__, "job": job, "fit_rel_rms": round(fit.rel_rms, 3),
        "points": [[r["ranks"], r["phases_ms"]["plan"], r["phases_ms"]["group_pack"]]
                   for r in rows]}}
    return replace(base, params=params, sources=sources, provenance=prov,
                   description=f"{base.description} coll.t_plan_id and coll.t_count fitted by "
                               "mdloader rank-cost.".strip())
