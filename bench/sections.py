"""The sections of ``bench/RESULTS.md``, in order, and the other results pages quote: each
topic declares its own in ``bench/<topic>/sections.py``; this module puts them in order.

To add a benchmark's section, declare a :class:`~bench.reporting.Section` in its topic's
``sections.py`` (a title, the exact command that writes its data, the script, the files it reads
under ``bench/results/`` (the first one decides whether the section appears), the figures it
names and a ``body(data)`` function returning Markdown lines) and list it in ``SECTIONS`` below.
Have the benchmark write :func:`bench.harness.record` into its JSON: the section's header shows
the dates it records. Then ``python -m bench.report`` and commit ``RESULTS.md`` and
``bench/README.md`` with the JSON. A result that a page quotes but that has no section is an
:class:`~bench.reporting.Other` of its topic; a superseded one goes to ``bench/results/archive/``
(``tests/integration/test_bench_report.py`` checks that every file under ``bench/results/`` is
one of these).
"""

from __future__ import annotations

from bench.convert import sections as convert
from bench.ddstore import sections as ddstore
from bench.estimator import sections as estimator
from bench.fairchem import sections as fairchem
from bench.faults import sections as faults
from bench.fetch import sections as fetch
from bench.gil import sections as gil
from bench.gpu import sections as gpu
from bench.groups import sections as groups
from bench.loaders import sections as loaders
from bench.reporting import Other, Section
from bench.scale import sections as scale
from bench.store import sections as store

SECTIONS: list[Section] = [
    loaders.TARGETS, loaders.SIDE_BY_SIDE, loaders.WHY_MISSED, loaders.ACROSS_HOSTS,
    fetch.FIXED_COST, ddstore.BATCHED, gpu.RATE, gil.GIL_FREE, gpu.RATE_H200, gpu.DEMO,
    groups.DEVELOPED, groups.HELD_OUT, groups.LOADING, groups.MODEL, loaders.TRAINING,
    estimator.ACCURACY, estimator.CLUSTER, estimator.CHOICE, fetch.MULTI, fetch.ASYNC_PROGRESS,
    estimator.SCALE_MODEL, estimator.RANK_COST, fairchem.BATCHES, convert.RATE, store.LOAD_PEAK,
    scale.DATASET,
]

OTHER_RESULTS: list[Other] = [*estimator.OTHERS, *ddstore.OTHERS, *fetch.OTHERS, *gpu.OTHERS,
                              *gil.OTHERS, *scale.OTHERS, *faults.OTHERS]

#: the benchmarks ``make bench`` (tools/bench.sh) runs, as modules
ENTRY_POINTS = (
    "bench.loaders.compare", "bench.ddstore.batched", "bench.estimator.rank_cost",
    "bench.fairchem.batches", "bench.convert.rate", "bench.store.load_peak", "bench.gpu.rate",
    "bench.gil.targets", "bench.gpu.demo", "bench.loaders.training",
    "bench.estimator.scale_model", "bench.groups.model", "bench.scale.dataset", "bench.scale.step",
    "bench.estimator.accuracy", "bench.estimator.cluster", "bench.estimator.backend_choice",
    "bench.groups.cluster", "bench.report")
#: benchmarks run by hand (their command is in the section or result they feed): A/B runs of two
#: trees, profiles, runs that need MPICH, a GPU node or a given build of DDStore
BY_HAND = (
    "bench.ddstore.collective_ab", "bench.faults.update", "bench.fetch.async_progress",
    "bench.fetch.coll_progress", "bench.fetch.multi", "bench.fetch.profile", "bench.fetch.trees_ab",
    "bench.gil.producer_cost", "bench.gil.producer_profile", "bench.scale.collective_step_cpu",
    "bench.scale.regression", "bench.scale.step_cpu_parts")
