"""Checks for MPI scripts that survive ``python -O``.

A bare ``assert`` is removed when Python runs with ``-O`` (or ``PYTHONOPTIMIZE``), so an MPI
script checked with it would pass whatever it computed. ``check(cond, msg)`` always runs: it
raises :class:`AssertionError` naming the rank and `msg`, and under ``python -m mpi4py`` the
uncaught error aborts the whole job (every rank exits non-zero).
"""

from __future__ import annotations

import os


def _rank() -> str:
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        if os.environ.get(var, "").isdigit():
            return os.environ[var]
    return "0"


def check(cond, msg="check failed") -> None:
    """Raise ``AssertionError('[rank r] msg')`` unless `cond` is true (kept under ``-O``)."""
    if not cond:
        raise AssertionError(f"[rank {_rank()}] {msg}")
