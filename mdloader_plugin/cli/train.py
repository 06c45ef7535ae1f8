"""``mdloader train FRAMEWORK ...``: run a framework's own training loop with MDLoader.

Each framework is a package ``mdloader_plugin.integrations.<name>`` whose ``driver`` module has
``add_arguments(parser)`` and ``main(args) -> int``; this module only dispatches, so adding a
framework adds no code here beyond its name in ``integrations.FRAMEWORKS``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util

from ..integrations import FRAMEWORKS


def _driver(name: str):
    return importlib.import_module(f"mdloader_plugin.integrations.{name}.driver")


class _DriverParser(argparse.ArgumentParser):
    """A framework's parser that imports its driver (and with it the framework and torch) only
    when ``mdloader train NAME`` is parsed or its help is shown: every other command, and
    ``mdloader --help``, then starts without importing torch."""

    framework = ""

    def _load(self) -> None:
        if self.get_default("func") is None:
            driver = _driver(self.framework)
            self.description = (driver.__doc__ or "").strip().splitlines()[0].replace("``", "")
            driver.add_arguments(self)
            self.set_defaults(func=driver.main)

    def parse_known_args(self, args=None, namespace=None):
        self._load()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._load()
        return super().format_help()


def register(sub) -> None:
    p = sub.add_parser(
        "train", help="train with a framework's own loop, fed by MDLoader or its own loader",
        description="Run HydraGNN's (or another framework's) training under mpiexec with the "
                    "loader the config selects (`loader: mdloader` or the framework's own).",
        epilog="example: mpiexec -n 4 mdloader train hydragnn --config "
               "recipes/hydragnn/demo.yaml --set loader=hydragnn",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    fw = p.add_subparsers(dest="framework", metavar="FRAMEWORK", required=True,
                          parser_class=_DriverParser)
    for name in FRAMEWORKS:
        if importlib.util.find_spec(f"mdloader_plugin.integrations.{name}.driver") is None:
            continue  # that integration is not in this tree
        q = fw.add_parser(name, help=f"train with {name}")
        q.framework = name
