"""Upstream HydraGNN's own training scripts, unmodified, with MDLoader serving their data.

What ``python -m mdloader_plugin.hydragnn SCRIPT [ARGS]`` (``mdloader run hydragnn``) is made of:
:mod:`.launcher` (the entry: checks, rank variables, runs the script), :mod:`.hooks` (what is
replaced in upstream's modules, the table of upstream's data flags, the launcher's log line),
:mod:`.reader` (upstream's ``AdiosDataset`` and ``adios2_open`` on a serial ADIOS2),
:mod:`.data` (upstream's ``DistDataset`` and ``create_dataloaders`` over an MDLoader store) and
:mod:`.timing` (the epoch lines of the script's train loader). Everything here serves scripts
MDLoader did not write; ``mdloader train hydragnn`` (the ``loader:`` switch) and the drop-in for
scripts of your own live one level up (:mod:`mdloader_plugin.integrations.hydragnn`).
"""
