"""Data-set scale: index and order per rank, their per-step cost,
and the compact index's before/after."""
