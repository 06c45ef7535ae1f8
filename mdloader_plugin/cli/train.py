"""``mdloader train FRAMEWORK ...``: run a framework's own training loop with MDLoader.

Each framework is a package ``mdloader_plugin.integrations.<name>`` whose ``driver`` module has
``add_arguments(parser)`` and ``main(args) -> int``; this module only dispatches, so adding a
framework adds no code here beyond its name in ``integrations.FRAMEWORKS``.
"""

from __future__ import annotations

import argparse
import importlib

from ..integrations import FRAMEWORKS


def _driver(name: str):
    return importlib.import_module(f"mdloader_plugin.integrations.{name}.driver")


def register(sub) -> None:
    p = sub.add_parser(
        "train", help="train with a framework's own loop, fed by MDLoader or its own loader",
        description="Run HydraGNN's (or another framework's) training under mpiexec with the "
                    "loader the config selects (`loader: mdloader` or the framework's own).",
        epilog="example: mpiexec -n 4 mdloader train hydragnn --config "
               "recipes/hydragnn/demo.yaml --set loader=hydragnn",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    fw = p.add_subparsers(dest="framework", metavar="FRAMEWORK", required=True)
    for name in FRAMEWORKS:
        try:
            driver = _driver(name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith(f"mdloader_plugin.integrations.{name}"):
                continue  # that integration is not in this tree
            raise
        q = fw.add_parser(name, help=f"train with {name}",
                          description=(driver.__doc__ or "").strip().splitlines()[0]
                          .replace("``", ""))
        driver.add_arguments(q)
        q.set_defaults(func=driver.main)
