"""The sections of ``bench/RESULTS.md`` about keeping a GPU fed and HydraGNN on a GPU node, and
the results of this topic pages quote."""

from __future__ import annotations

from typing import Callable

from bench.gpu import demo as gpu_demo
from bench.gpu import rate as gpu_rate
from bench.reporting import Other, Section

def _gpu_rate(fig: str, page: str) -> Callable[[dict], list[str]]:
    def body(d: dict) -> list[str]:
        return gpu_rate.tables(next(iter(d.values()))) + [
            "", f"Figure: `{fig}`; method and reading: {page}."]
    return body

RATE = Section(
    "Keeping a GPU fed (trainer stand-in at GPU step rates, 2 shared cores)",
    ("python -m bench.gpu.rate --steps 10 --repeats 1",),
    ("bench/gpu/rate.py", "bench/gpu/feeders.py"),
    ("gpu_rate.json",), _gpu_rate("bench/gpu_rate.png", "`docs/gpu-feeding.md`"),
    ("bench/gpu_rate.png",))
RATE_H200 = Section(
    "Keeping a GPU fed, with a core a rank (16-core H200 node)",
    ("python -m bench.gpu.rate --steps 50 --repeats 2 "
     "--out bench/results/gpu_rate_h200.json --figure bench/gpu_rate_h200.png",),
    ("bench/gpu/rate.py", "bench/gpu/feeders.py"), ("gpu_rate_h200.json",),
    _gpu_rate("bench/gpu_rate_h200.png", "`docs/gpu-feeding.md`"),
    ("bench/gpu_rate_h200.png",), make_bench="no")
DEMO = Section(
    "HydraGNN on a GPU (one H200 node)",
    ("bash tools/gpu_demo.sh",
     "python -m bench.gpu.demo bench/results/gpu_demo_epochs.log --machine ... --date "
     "2026-12-04"), ("tools/gpu_demo.sh", "bench/gpu/demo.py"), ("gpu_demo.json",),
    lambda d: gpu_demo.table(d["gpu_demo.json"]), make_bench="on a CUDA node")

OTHERS = [
    Other("gpu_demo_epochs.log", ("bash tools/gpu_demo.sh",), ("tools/gpu_demo.sh",),
          ("docs/gpu-feeding.md",)),
    Other("gpu_rate_h200_process.log", ("python -m bench.gpu.rate --loaders "
                                        "onesided-process,auto-process ...",),
          ("bench/gpu/rate.py",), ("docs/gpu-feeding.md",)),
    Other("gpu_rate_producer.json", ("python -m bench.gpu.rate --steps 100 --repeats 2 --out "
                                     "bench/results/gpu_rate_producer.json",),
          ("bench/gpu/rate.py",), ("docs/gpu-feeding.md",)),
]
