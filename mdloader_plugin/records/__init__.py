"""One graph <-> one byte record (``codec``), and many records -> joined columns (``columns``).

No MPI, no torch."""
