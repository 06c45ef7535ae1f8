"""The section of ``bench/RESULTS.md`` about data-set scale, and the compact index's
before/after runs ``docs/scale.md`` quotes (history: kept as the page's evidence, not in
``RESULTS.md``)."""

from __future__ import annotations

from bench.reporting import Other, markdown

_SR = "python -m bench.scale.regression"

DATASET = markdown(
    "Data-set scale: index and order per rank",
    ("python -m bench.scale.dataset --samples 20000000",), ("bench/scale/dataset.py",),
    "dataset_scale", make_bench="yes")

OTHERS = [
    Other("scale_step.json", ("python -m bench.scale.step",), ("bench/scale/step.py",),
          ("bench/results/scale_regression.md", "docs/scale.md")),
    Other("scale_regression.*", (f"{_SR} --pre A.json,B.json --cur C.json,D.json --train-pre "
                                 "T.json --train-cur U.json --step bench/results/scale_step.json",),
          ("bench/scale/regression.py", "bench/scale/step.py"), ("docs/scale.md",)),
    Other("scale_regression_ab*", (f"{_SR} --ab bench/results/scale_regression_ab",),
          ("bench/scale/regression.py", "bench/scale/collective_step_cpu.py"),
          ("docs/scale.md",)),
    Other("scale_regression_grid*", (f"{_SR} --pre bench/results/scale_regression_grid/"
                                     "pre_1.json,... --cur bench/results/scale_regression_grid/"
                                     "cur_2.json,... --out bench/results/scale_regression_grid",),
          ("bench/scale/regression.py",), ("docs/scale.md",)),
    Other("scale_regression_oc20_ab*", (f"{_SR} --ab bench/results/scale_regression_oc20_ab "
                                        "--out bench/results/scale_regression_oc20",),
          ("bench/scale/regression.py", "bench/scale/step_cpu_parts.py"), ("docs/scale.md",)),
    Other("scale_regression_h2x32_ab*", (f"{_SR} --ab bench/results/scale_regression_h2x32_ab "
                                         "--out bench/results/scale_regression_h2x32",),
          ("bench/scale/regression.py",), ("docs/scale.md",)),
]
