"""The section of ``bench/RESULTS.md`` about the store's memory while it loads."""

from __future__ import annotations

from bench.reporting import Section
from bench.store import load_peak

LOAD_PEAK = Section(
    "Load peak: memory while a store loads, over records + index",
    ("python -m bench.store.load_peak",), ("bench/store/load_peak.py",), ("load_peak.json",),
    lambda d: load_peak.table(d["load_peak.json"]))
