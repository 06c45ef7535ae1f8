"""MDLoader's benchmarks, grouped by topic; run one as ``python -m bench.<topic>.<name>``.

``bench.harness`` launches ranks, times and records; each topic folder holds its benchmarks,
the sections of ``RESULTS.md`` they feed (``sections.py``) and the figures pages quote
(``figures.py``); ``bench.report`` writes ``RESULTS.md``. See ``bench/README.md``.
"""
