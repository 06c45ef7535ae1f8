"""The section of ``bench/RESULTS.md`` about DDStore's batched reads, and the result of this
topic a page quotes."""

from __future__ import annotations

from bench.ddstore import figures as ddstore_figures
from bench.reporting import Other, Section

BATCHED = Section(
    "Batched reads: DDStore 954ef59's get_batch (methods 0 and 1) against MDLoader, fetch only",
    ("python -m bench.ddstore.batched --rounds 5 --steps 6",
     "python -m bench.ddstore.batched --cluster 2x2@1gbit --rounds 5 --steps 6 --merge"),
    ("bench/ddstore/batched.py", "bench/ddstore/layouts.py", "bench/ddstore/figures.py",
     "tools/build_ddstore.sh"),
    ("ddstore_batched.json",), lambda d: ddstore_figures.table(d["ddstore_batched.json"]))

OTHERS = [
    Other(f"ddstore_coll_ab_n{n}.json",
          (f"PYTHONPATH=build/ddstore-954ef59 mpiexec -n {n} python -m mpi4py -m "
           "bench.ddstore.collective_ab --dataset hydragnn --batches 4,32 --steps 300 "
           f"--out bench/results/ddstore_coll_ab_n{n}.json",),
          ("bench/ddstore/collective_ab.py",), ("docs/benchmarks.md",))
    for n in (2, 3, 4)
]
