"""Fetched records -> a batch: PyG batches (``pyg``, with the compiled kernels of
``records.kernels``),
the copy to the trainer's device (``device``)."""
