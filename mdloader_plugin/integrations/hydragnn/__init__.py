"""HydraGNN integration: ``loader: mdloader`` in a HydraGNN config, HydraGNN's own training loop.

Modules: :mod:`.config` (config file, ``loader:`` switch, ``--set``), :mod:`.compat` (HydraGNN
version differences, distributed setup), :mod:`.graphs` (samples, update_config stand-ins),
:mod:`.schema` (main527's named data schema), :mod:`.loaders` (the loader registry),
:mod:`.baseline` (HydraGNN's DataLoader over per-graph ADIOS2 reads), :mod:`.epochs` (epoch
lines in run.log), :mod:`.resume` (``Training.continue``), :mod:`.dropin` (``create_dataloaders``
for scripts of your own, one import changed), :mod:`.driver` (the run). Upstream's own scripts,
unmodified, under the launcher (``python -m mdloader_plugin.hydragnn``): :mod:`.upstream`.
HydraGNN 3.0 and 5.0 are both supported (docs/hydragnn-5.md).
"""
