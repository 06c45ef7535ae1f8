"""The ``loader`` config group of MDLoader's fairchem integration, found from any config.

fairchem composes a config with Hydra from the config's own folder (a ``.yml`` config from a
copy in a temporary folder, where nothing beside it is found). Hydra scans the ``hydra_plugins``
namespace package of every installed distribution for plugins; this one appends the group files
shipped inside the package (``mdloader_plugin/integrations/fairchem/conf``) to every search
path, so ``defaults: [loader: mdloader]`` works in any fairchem config, ``.yml`` or ``.yaml``,
with nothing copied. Appended, not prepended: a ``loader/`` folder beside the user's own config
is searched first and wins (``recipes/fairchem/multi/loader/mdloader.yaml`` does so).

This module is imported by every Hydra application of the environment when Hydra starts: it
imports Hydra's plugin base only, never the package.
"""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

#: where the group files live (a ``pkg://`` path: found inside the installed package)
CONF = "pkg://mdloader_plugin.integrations.fairchem.conf"


class MDLoaderSearchPathPlugin(SearchPathPlugin):
    """Appends :data:`CONF` to Hydra's config search path (provider ``mdloader``)."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="mdloader", path=CONF)
