"""Fetched records -> a batch: PyG batches (``pyg``, with the compiled kernels of
``records.kernels``),
the copy to the trainer's device (``device``).

``mdloader_plugin.batching`` was one module before the package was laid out in layers; its public
names are still importable from here."""


from .pyg import (  # noqa: F401  (the package's face)
    pyg_sample, pyg_collate, ColumnTransform, cat_axis, ColumnCollate, build_batch,
)

__all__ = ["pyg_sample", "pyg_collate", "ColumnTransform", "cat_axis", "ColumnCollate",
           "build_batch"]
