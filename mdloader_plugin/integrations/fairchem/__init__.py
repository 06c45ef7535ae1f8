"""fairchem integration: ``loader: mdloader`` as a Hydra config group, fairchem's own trainer.

Modules: :mod:`.loader` (the group's ``build_loader`` target and the DataLoader-like wrapper),
:mod:`.data` (``AtomicData`` <-> MDLoader samples), :mod:`.launch` (fairchem on ranks started by
``mpiexec``/``srun``), :mod:`.driver` (``mdloader train fairchem``), :mod:`.callbacks` (epoch-time
lines), :mod:`.synth` (synthetic OC20-like slabs for tests and demos).
"""
