"""ASE's G2 molecule collection (162 small molecules shipped inside ASE; no download).

Source name ``g2`` (no file): ``mdloader convert g2 --out data/g2.bp``. Each molecule gets the
fields of :func:`atoms.atoms_to_graph` (no cell: ``cell`` is zero, ``pbc`` false; the
initial magnetic moments some molecules carry are left out so every graph has the same keys)
plus real reference data from ASE's G2 tables (``ase.data.g2``): ``energy`` = standard
formation enthalpy at 298 K converted from kcal/mol to eV, ``zpe`` (zero-point energy, eV) and
``ionization_energy`` (eV; 0 where the table has none) — a small real regression target for demos.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from .atoms import atoms_to_graph

NAME = "g2"
KCAL_MOL_TO_EV = 0.0433641


def accepts(path: str) -> bool:
    """Whether ``path`` looks like this source's input."""
    return path == "g2"


def _names() -> list[str]:
    from ase.collections import g2

    return list(g2.names)


def count(path: str) -> int:
    """Number of structures in ``path`` (for the progress bar and the split)."""
    return len(_names())


def iterate(path: str) -> Iterator[dict]:
    """The structures of ``path`` one at a time, each a ``dict`` of numpy arrays."""
    from ase.collections import g2
    from ase.data.g2 import data

    for name in _names():
        ref = data.get(name, {})
        atoms = g2[name]
        atoms.arrays.pop("initial_magmoms", None)  # only some molecules have them
        g = atoms_to_graph(atoms)
        g["energy"] = np.array([float(ref.get("enthalpy") or 0.0) * KCAL_MOL_TO_EV])
        g["zpe"] = np.array([float(ref.get("ZPE") or 0.0) * KCAL_MOL_TO_EV])
        g["ionization_energy"] = np.array([float(ref.get("ionization energy") or 0.0)])
        yield g
