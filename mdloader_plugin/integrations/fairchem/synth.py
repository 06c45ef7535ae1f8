"""Synthetic OC20-like slabs with adsorbates, labelled by ASE's EMT, for fairchem tests and demos.

The generators live in :mod:`mdloader_plugin.sources.synth_atoms` (slabs, molecules, bulk
crystals); this module keeps the names the fairchem helpers and tests import.
"""

from ...sources.synth_atoms import METALS, slab, slabs, write_aselmdb  # noqa: F401
