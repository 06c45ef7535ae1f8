"""The ``mdloader`` command. One module a subcommand; each has ``register(subparsers)``.

A subcommand module defines ``register(sub)`` that adds its parser and sets ``func`` to a
callable taking the parsed namespace and returning an exit code. Add new modules to COMMANDS.

Subcommands import the package's layers inside the function that runs them, not at module level:
``mdloader --help`` and argument errors then answer without starting MPI, torch or ADIOS2 (the
integrations do the same for the frameworks that load them by dotted path). Everywhere below
``cli/`` and ``integrations/`` package imports sit at module level, except two optional parts
loaded on first use: the compiled batch kernels and the converters of optional formats.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys


COMMANDS = [
    "synth",
    "convert",
    "cluster",
    "train",
    "run",
    "compare-logs",
    "check",
    "estimate",
    "calibrate",
    "rank-cost",
    "plan",
]

#: commands that run as MPI ranks: each checks at start that MPI's world is what the launcher
#: started (world.check_launch), on every process, before any collective
MPI_COMMANDS = {"train", "check", "calibrate", "convert"}

EPILOG = """\
typical session:
  mdloader synth --kind hydragnn --num-graphs 3001 --out data/mols.bp
  mpiexec -n 4 mdloader check data/mols.bp --batch-size 7 --epochs 2
  mpiexec -n 4 mdloader train hydragnn --config recipes/hydragnn/demo.yaml

Run `mdloader COMMAND --help` for each command's options."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mdloader",
        description="In-memory distributed graph loader for HydraGNN and fairchem: "
                    "data tools, checks, calibration and training drivers.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"mdloader {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name.replace('-', '_')}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from ..mpi.world import report_error

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command in MPI_COMMANDS:
            _check_launch()
        return int(args.func(args) or 0)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - the CLI turns every failure into one line
        return report_error(exc)


def _check_launch() -> None:
    """Stop this process with exit 2 when MPI's world is not what the launcher started. No MPI
    job exists to abort then (each process is its own world), so the process just ends: the
    line is printed once (by the launcher's rank 0), without MPI_Abort's help text a process."""
    from ..mpi.world import LaunchError, check_launch, report_error

    try:
        check_launch()
    except LaunchError as exc:
        code = report_error(exc)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
