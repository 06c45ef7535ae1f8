"""Config groups shipped with the package, on Hydra's search path through MDLoader's plugin
(``hydra_plugins/mdloader_plugin_searchpath``): ``loader/mdloader.yaml``, the ``loader: mdloader``
option of any fairchem config."""
