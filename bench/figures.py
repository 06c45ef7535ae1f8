"""The benchmark figures that README.md and docs/ quote, computed from the JSON under
``bench/results/`` (one function a figure, ``FIGURES``: key -> function).

A page quotes a figure as ``<!-- figure: KEY -->VALUE<!-- /figure -->``; ``python
tools/docs_figures.py`` rewrites every ``VALUE`` from the JSON and
``tests/integration/test_bench_report.py`` fails when a quoted value differs from what its
function gives, so a number read on two pages is one number, and a re-run that moves it moves it
everywhere. Add a figure: a function and a line in ``FIGURES`` of its topic's ``figures.py``
(``bench/<topic>/figures.py``); this module merges them.
"""

from __future__ import annotations

from typing import Callable

from bench.convert.sections import FIGURES_CONVERT
from bench.ddstore.figures import FIGURES_DDSTORE954
from bench.estimator import figures as estimator
from bench.estimator.rank_cost_figures import FIGURES_RANK_COST
from bench.fairchem.figures import FIGURES_FAIRCHEM
from bench.faults import figures as faults
from bench.fetch import figures as fetch
from bench.gil import figures as gil
from bench.gpu import figures as gpu
from bench.groups import figures as groups
from bench.loaders import figures as loaders
from bench.scale import figures as scale
from bench.store.load_peak import FIGURES_LOAD_PEAK

FIGURES: dict[str, Callable[[], str]] = {}
for _part in (loaders.FIGURES, fetch.FIGURES, estimator.FIGURES, groups.FIGURES, scale.FIGURES,
              gpu.FIGURES, gil.FIGURES, FIGURES_RANK_COST, FIGURES_FAIRCHEM, FIGURES_DDSTORE954,
              FIGURES_CONVERT, FIGURES_LOAD_PEAK, faults.FIGURES):
    assert not set(_part) & set(FIGURES), set(_part) & set(FIGURES)
    FIGURES.update(_part)


def value(key: str) -> str:
    """The figure ``key`` as pages quote it (``KeyError`` names an unknown key)."""
    return FIGURES[key]()
