"""fairchem's max_atoms batches and data-set mix under MDLoader."""
