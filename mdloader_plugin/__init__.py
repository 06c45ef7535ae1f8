"""MDLoader: keep a graph data set in the memory of the MPI ranks and serve random mini-batches.

Layers (arrows point down only)::

    integrations/  hydragnn, fairchem: the `loader: mdloader` config switch, epoch-time logs
    loader         MDLoader: iterable of batches, prefetch thread, timing stats, backend choice
    batching       fetched records -> PyG batch (column-wise, or per sample + collate)
    sampler | estimator/ | backends/ | store
    codec          one graph <-> one byte record; columns: many records -> joined arrays
    sources/       ADIOS2 files in HydraGNN's layout, converters, synthetic data

Nothing here imports a training framework outside ``integrations/``; ``codec``, ``columns``,
``sampler`` and ``sources`` never import MPI.
"""

import os as _os
import sys as _sys

__version__ = "0.1.0"

# Open MPI settings that must be in place before MPI starts: no UCX on these machines (it prints
# an error per window otherwise), and the TCP layer's own progress thread, which shortens one-sided
# Gets across nodes while the owner computes (the one-sided backend adds its own progress thread
# for the guarantee: backends/onesided.py). Import this package before mpi4py.MPI for them to
# apply; a user's own setting always wins.
if "mpi4py.MPI" not in _sys.modules:
    _os.environ.setdefault("OMPI_MCA_osc", "^ucx")
    _os.environ.setdefault("OMPI_MCA_btl_tcp_progress_thread", "1")

__all__ = ["__version__"]
