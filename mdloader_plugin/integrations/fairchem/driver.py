"""``mdloader train fairchem``: train with fairchem-core 2.x on MPI ranks.

Usage (every rank runs the same command)::

    mpiexec -n 4 python -m mpi4py -m mdloader_plugin.integrations.fairchem \\
        -c recipes/fairchem/cpu.yaml [hydra overrides, e.g. loader=fairchem loader.backend=onesided]
    srun -n 4 python -m mpi4py -m mdloader_plugin.integrations.fairchem -c ...

(``srun --mpi=pmi2`` with the PyPI mpich wheel; on a Cray, mpi4py built against Cray MPICH needs
no ``--mpi``: docs/fairchem.md.) Options after the config are Hydra overrides exactly as
fairchem's own ``fairchem -c CFG ...`` takes them. The synthetic OC20-like data set the CPU
recipe trains on: ``python -m mdloader_plugin.integrations.fairchem.data --out data/oc20``.
"""

from __future__ import annotations

import argparse
from typing import Sequence

DESCRIPTION = ("Train a fairchem (OpenCatalyst) model on the MPI ranks of this job; "
               "`loader: mdloader` or `loader: fairchem` in the YAML (or loader=... on the "
               "command line) picks the data loader.")


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``mdloader train fairchem``'s arguments (``-c CONFIG`` and Hydra overrides) to ``p``."""
    p.add_argument("-c", "--config", required=True, help="fairchem YAML config "
                   "(e.g. recipes/fairchem/cpu.yaml)")
    p.add_argument("overrides", nargs=argparse.REMAINDER,
                   help="Hydra overrides, e.g. loader=fairchem loader.backend=onesided "
                        "max_epochs=2 +job.timestamp_id=run1")
    return p


def _split(argv_or_args) -> tuple[str, list[str]]:
    if isinstance(argv_or_args, argparse.Namespace):
        ns = argv_or_args
        rest = (getattr(ns, "overrides", None) or getattr(ns, "rest", None)
                or getattr(ns, "extra", None) or [])
        config = getattr(ns, "config", None)
        if config is None:  # a dispatcher that passed everything through unparsed
            return _split(list(rest))
        return config, [o for o in rest if o != "--"]
    p = add_arguments(argparse.ArgumentParser(
        prog="mdloader train fairchem", description=DESCRIPTION))
    ns = p.parse_args(list(argv_or_args) if argv_or_args is not None else None)
    return ns.config, [o for o in ns.overrides if o != "--"]


def main(argv_or_args: Sequence[str] | argparse.Namespace | None = None) -> int:
    """Entry point for ``mdloader train fairchem`` and ``python -m ...integrations.fairchem``."""
    config, overrides = _split(argv_or_args)
    from .launch import run

    return run(config, overrides)
