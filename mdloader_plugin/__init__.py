"""MDLoader: keep a graph data set in the memory of the MPI ranks and serve random mini-batches.

Layers (arrows point down only)::

    integrations/  hydragnn, fairchem: the `loader: mdloader` config switch, epoch-time logs
    loader         MDLoader: iterable of batches, prefetch thread, timing stats, backend choice
    sampler | estimator/ | backends/ | store
    codec          one graph <-> one byte record
    sources/       ADIOS2 files in HydraGNN's layout, converters, synthetic data

Nothing here imports a training framework outside ``integrations/``; ``codec``, ``sampler`` and
``sources`` never import MPI.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
