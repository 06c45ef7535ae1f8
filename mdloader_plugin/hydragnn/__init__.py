"""``python -m mdloader_plugin.hydragnn SCRIPT [ARGS]``: upstream HydraGNN's own training scripts,
unmodified, with MDLoader serving their data (the launcher lives in
:mod:`mdloader_plugin.integrations.hydragnn.upstream.launcher`)."""
