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

# Open MPI setting that must be in place before MPI starts: no UCX on these machines (it prints an
# error per window otherwise). Import this package before mpi4py.MPI for it to apply; a user's own
# setting wins. (Progress of one-sided Gets across nodes is the one-sided backend's own thread:
# backends/onesided.py says why Open MPI's btl_tcp_progress_thread is left off.)
if "mpi4py.MPI" not in _sys.modules:
    _os.environ.setdefault("OMPI_MCA_osc", "^ucx")

__all__ = ["__version__"]
