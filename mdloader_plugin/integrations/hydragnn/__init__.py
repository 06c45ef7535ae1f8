"""HydraGNN integration: ``loader: mdloader`` in a HydraGNN config, HydraGNN's own training loop.

Modules: :mod:`.config` (config file, ``loader:`` switch, ``--set``), :mod:`.compat` (HydraGNN
version differences, distributed setup), :mod:`.graphs` (samples, update_config stand-ins),
:mod:`.loaders` (the loader registry), :mod:`.baseline` (HydraGNN's DataLoader over per-sample
ADIOS2 reads), :mod:`.epochs` (epoch lines in run.log), :mod:`.resume` (``Training.continue``),
:mod:`.dropin` (``create_dataloaders`` for upstream-style scripts), :mod:`.driver` (the run).
HydraGNN 3.0 and 5.0 are both supported (docs/hydragnn-5.md).
"""
