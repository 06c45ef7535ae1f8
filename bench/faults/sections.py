"""The fault matrix's JSON, as a result a page quotes (no section of RESULTS.md: the table is in
docs/reliability.md)."""

from __future__ import annotations

from bench.reporting import Other

OTHERS = [
    Other("faults.json", ("python -m bench.faults.update [--cluster]",),
          ("bench/faults/update.py", "tests/integration/test_fault_matrix.py",
           "tests/common/fault_matrix.py", "tests/mpi_scripts/fault_cell.py"),
          ("docs/reliability.md",)),
]
