"""Old import paths, kept for users: ``mdloader_plugin.world`` is ``mdloader_plugin.mpi.world``.

Before the package was laid out in layer folders its modules sat flat under ``mdloader_plugin/``.
Importing an old path returns the module at its new place (the same module object, not a copy:
``mdloader_plugin.world is mdloader_plugin.mpi.world``), so code and pickles written against the
old paths keep working. Old modules that are now packages of the same name (``store``,
``loader``, ``batching``, ``sampling``) re-export their public names from the package instead.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

_PKG = __name__.rpartition(".")[0]

#: old module (below the package) -> its module now
ALIASES: dict[str, str] = {
    "errors": "core.errors",
    "options": "core.options",
    "log": "core.log",
    "epochlog": "core.epochlog",
    "codec": "records.codec",
    "columns": "records.columns",
    "order": "sampling.order",
    "sampler": "sampling.schedule",
    "sampling.sampler": "sampling.schedule",
    "sampling.plan": "sampling.planner",
    "sampling.base": "sampling.mixes.base",
    "sampling.fairchem": "sampling.mixes.fairchem",
    "sampling.hydragnn": "sampling.mixes.hydragnn",
    "sampling.proportional": "sampling.mixes.proportional",
    "sampling.weights": "sampling.mixes.weights",
    "world": "mpi.world",
    "groups": "mpi.groups",
    "backends.progress": "mpi.progress",
    "budget": "store.budget",
    "replicate": "store.replicate",
    "index": "store.index",
    "shared_index": "store.shared_index",
    "device": "batching.device",
    "check": "loader.verify",
    "placement": "loader.open",
    "watchdog": "loader.watchdog",
    "cluster": "devtools.cluster",
    "cluster.launch": "devtools.cluster.launch",
    "cluster.netns": "devtools.cluster.netns",
    "estimator.layout": "estimator.group_size",
    # the launcher's pieces, now in their own sub-package (upstream HydraGNN's own scripts)
    "integrations.hydragnn.launcher": "integrations.hydragnn.upstream.launcher",
    "integrations.hydragnn.upstream_hooks": "integrations.hydragnn.upstream.hooks",
    "integrations.hydragnn.upstream_reader": "integrations.hydragnn.upstream.reader",
    "integrations.hydragnn.upstream_data": "integrations.hydragnn.upstream.data",
    "estimator.plan_fit": "estimator.rank_cost_fit",
}


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path and loads it as the module at its new place."""

    def find_spec(self, fullname, path=None, target=None):
        prefix, _, rest = fullname.partition(".")
        if prefix != _PKG or rest not in ALIASES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        module = importlib.import_module(f"{_PKG}.{ALIASES[spec.name.partition('.')[2]]}")
        spec.loader_state = module.__spec__  # the import machinery overwrites __spec__ next
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state  # the module's own spec back


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
