"""The section of ``bench/RESULTS.md`` about fairchem's max_atoms batches and data-set mix."""

from __future__ import annotations

from bench.fairchem import figures as fairchem_figures
from bench.reporting import Section

def _fairchem(d: dict) -> list[str]:
    """Atoms a batch against max_atoms (fairchem's sampler, MDLoader, the rule before) and the
    bytes a sample of fairchem's 4-data-set mix."""
    m = d["fairchem_batches.json"]["mix"]
    return [f"{fairchem_figures.when()}: atoms a batch in tenths of max_atoms "
            "(one epoch, one rank's view of all batches).", fairchem_figures.table().strip(), "",
            f"fairchem's 4-data-set mix (temperature 2, seeded per-set permutations), "
            f"N = {m['num_samples']:.0e}, P = {m['ranks']}: {m['bytes_per_sample']:.2f} B a "
            f"sample of N-proportional state with the {m['order']} order; "
            f"{m['list_bytes_per_sample']:.2f} B with the expanded list kept."]

BATCHES = Section(
    "fairchem: max_atoms as a cap, and the 4-data-set mix's state",
    ("python -m bench.fairchem.batches",), ("bench/fairchem/batches.py",),
    ("fairchem_batches.json",), _fairchem)
