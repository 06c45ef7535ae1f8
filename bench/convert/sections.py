"""The section of ``bench/RESULTS.md`` about the conversion rate of ``mdloader convert``."""

from __future__ import annotations

from bench.convert import rate as convert_rate
from bench.reporting import Section

RATE = Section(
    "Conversion rate against ranks (mdloader convert, OC20-like .aselmdb shards)",
    ("python -m bench.convert.rate",), ("bench/convert/rate.py",),
    ("convert_rate.json",), convert_rate.section)
