"""MDLoader: keep a graph data set in the memory of the MPI ranks and serve random mini-batches.

Layers, one folder each, imports pointing down only::

    cli/           the `mdloader` command, one file a subcommand
    integrations/  hydragnn, fairchem: the `loader: mdloader` switch, drivers, epoch-time logs
    loader/        MDLoader: the iterable of batches, its producer, the backend switch, open, verify
    estimator/     cost models, machine profiles, the backend and group-size choice, online trial
    batching/      fetched records -> PyG batch (column-wise, or per sample + collate)
    backends/      one-sided (RMA Get) and collective (Alltoallv) fetches
    store/         this rank's records in one buffer, the global index, budget, replica copies
    sources/       ADIOS2 files in HydraGNN's layout, converters, synthetic data
    mpi/           the job's topology, collectives, launch checks, aborts, replica groups, progress
    sampling/      the epoch order, the schedule, each rank's step plans, data-set mixes
    records/       one graph <-> one byte record; many records -> joined columns
    core/          errors, settings, the logger

``devtools/`` holds the emulated multi-node cluster (test and benchmark infrastructure; it imports
``core`` and ``mpi`` at most); ``hydragnn/`` is the launcher's entry point. Nothing
imports a training framework outside ``integrations/`` except torch/PyG in ``batching/``;
``core``, ``records``, ``sampling`` and ``sources`` never import MPI.

The public API, for a training loop of your own (``docs/own-loop.md``)::

    from mdloader_plugin import MDLoader, ShardStore, World

    world = World.detect()                                   # the ranks mpiexec / srun started
    store = ShardStore.from_file(world, "data.bp", "trainset")  # each rank loads its block once
    loader = MDLoader(store, batch_size=32, seed=0)          # an iterable of PyG batches

Also exported: ``ColumnTransform`` (column-wise batches of your own sample type) and the errors
``MDLoaderError``, ``ConfigError``, ``DataError``, ``MemoryBudgetError``. Every other module path
is internal and may move.
"""

__version__ = "0.2.0"

#: The public API: what a training loop of your own imports (``from mdloader_plugin import
#: MDLoader, ShardStore, World``). Imported on first use, so ``import mdloader_plugin`` starts
#: neither MPI nor torch. Importing the package sets no MPI variable: the MPI's settings are the
#: user's (docs/getting-started.md, "Open MPI settings").
PUBLIC: dict[str, str] = {
    "MDLoader": "loader.loader",
    "ShardStore": "store.shard",
    "World": "mpi.world",
    "ColumnTransform": "batching.pyg",
    "MDLoaderError": "core.errors",
    "ConfigError": "core.errors",
    "DataError": "core.errors",
    "MemoryBudgetError": "core.errors",
}

__all__ = ["__version__", *PUBLIC]


def __getattr__(name: str):
    """The public names of :data:`PUBLIC`, imported from their modules on first use."""
    if name not in PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{PUBLIC[name]}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    """This module's names, the public API included before its first use."""
    return sorted(set(globals()) | set(PUBLIC))
