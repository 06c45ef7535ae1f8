"""The store: this rank's records in one buffer (``shard``), how a block gets there (``load``:
streamed in chunks), its options (``options``), the global index (``index``, ``shared_index``),
the memory budget (``budget``) and replica copies (``replicate``).

``mdloader_plugin.store`` was one module before the package was laid out in layers; its public
names are still importable from here."""


from .shard import (  # noqa: F401  (the package's face)
    block_bounds, ShardStore, exclusive_offsets,
)
from .options import StoreOptions  # noqa: F401

__all__ = ["block_bounds", "ShardStore", "StoreOptions", "exclusive_offsets"]
