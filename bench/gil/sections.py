"""The section of ``bench/RESULTS.md`` about the GIL-free producer, and the results of this topic
pages quote."""

from __future__ import annotations

from bench.gil import targets as gil_free
from bench.reporting import Other, Section

GIL_FREE = Section(
    "A producer that does not need the trainer's GIL (compiled kernels)",
    ("python -m bench.gil.targets --steps 200 --repeats 2 --rounds 3 --ranks 1,2",
     "python -m bench.gil.producer_cost --producer process --kernels auto --rounds 1 "
     "--steps 100 --out bench/results/producer_cost_process.json (at 12a65ad, before the "
     "helper-process producer was removed)"),
    ("bench/gil/targets.py", "bench/gil/producer_cost.py", "bench/gpu/rate.py"),
    ("producer_cost.json", "gpu_rate_gilfree.json", "gpu_rate_gilfree_numpy.json",
     "producer_cost_process.json", "gpu_rate_gilfree_queue.json"),
    lambda d: gil_free.tables(d["producer_cost.json"], d.get("gpu_rate_gilfree.json"),
                              d.get("gpu_rate_gilfree_numpy.json"),
                              d.get("producer_cost_process.json"),
                              d.get("gpu_rate_gilfree_queue.json"))
    + ["Method and reading: `docs/gil-free-batches.md`."],
    ("bench/gpu_rate_gilfree.png", "bench/gpu_rate_gilfree_numpy.png"))

OTHERS = [
    Other("producer_cost_ab.json", ("python -m bench.gil.producer_cost --before 619021b "
                                    "--rounds 4",),
          ("bench/gil/producer_cost.py",), ("docs/gpu-feeding.md",)),
    Other("producer_cost_ab_onejoin.json", ("python -m bench.gil.producer_cost --before HEAD~1 "
                                            "--rounds 4",),
          ("bench/gil/producer_cost.py",), ("docs/gpu-feeding.md",)),
]
