"""Run the fault matrix and put its table into docs/reliability.md.

    python -m bench.faults.update [--cluster] [-k EXPR]

runs ``tests/integration/test_fault_matrix.py`` with ``FAULT_MATRIX_JSON`` pointing at
``bench/results/faults.json`` (each cell measured is merged into it by its id), then
``tools/docs_figures.py`` (the table between ``<!-- figure: faults.table -->`` markers).
``--cluster`` adds the kill and stop cells across two emulated hosts (root, network namespaces).
The tests' exit status is this command's: a missed target still writes its measurement.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from bench.harness import RESULTS, ROOT


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cluster", action="store_true", help="also the two-host cells (root)")
    ap.add_argument("-k", default=None, help="only the cells pytest's -k selects")
    args = ap.parse_args()
    marks = "mpi" if args.cluster else "mpi and not cluster"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marks,
           "tests/integration/test_fault_matrix.py", *(["-k", args.k] if args.k else [])]
    env = {**os.environ, "FAULT_MATRIX_JSON": str(RESULTS / "faults.json")}
    rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
    subprocess.run([sys.executable, str(ROOT / "tools" / "docs_figures.py")], cwd=ROOT,
                   check=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
