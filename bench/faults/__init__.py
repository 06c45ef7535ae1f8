"""The fault matrix's table: its JSON (bench/results/faults.json) is written by the tests
(tests/integration/test_fault_matrix.py); docs/reliability.md quotes the table made here."""
