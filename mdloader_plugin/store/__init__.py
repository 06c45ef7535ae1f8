"""The store: this rank's records in one buffer (``shard``), how a block gets there (``load``:
streamed in chunks), its options (``options``), the global index (``index``, ``shared_index``),
the memory budget (``budget``) and replica copies (``replicate``)."""
