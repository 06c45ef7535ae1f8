"""The ``mdloader`` command. One module a subcommand; each has ``register(subparsers)``.

A subcommand module defines ``register(sub)`` that adds its parser and sets ``func`` to a
callable taking the parsed namespace and returning an exit code. Add new modules to COMMANDS.
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
]

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
    from ..world import report_error

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - the CLI turns every failure into one line
        return report_error(exc)


if __name__ == "__main__":
    sys.exit(main())
