"""ASE ``Atoms`` to a graph dict in OC20/fairchem field names (shared by the ASE sources).

Fields: ``pos [n,3]``, ``atomic_numbers [n]``, ``cell [1,3,3]``, ``pbc [1,3]``, ``natoms [1]``,
``tags [n]``, ``fixed [n]`` (1 where a ``FixAtoms`` constraint holds the atom), ``energy [1]`` and
``forces [n,3]`` when the attached calculator has them, ``stress`` and other numeric calculator
results, every other numeric per-atom array (``atoms.arrays``), and numeric ``atoms.info`` /
extra values as arrays with a leading dimension of 1. Non-numeric values are skipped (reported
through the `skipped` set so the caller can warn once).
"""

from __future__ import annotations

import numpy as np

_STANDARD = {"numbers", "positions", "tags"}


def numeric(value) -> np.ndarray | None:
    """`value` as a numeric array, or None for strings, dicts and other objects."""
    if isinstance(value, (str, bytes, dict)) or value is None:
        return None
    try:
        a = np.asarray(value)
    except Exception:  # noqa: BLE001 - ragged lists and objects are not storable
        return None
    return a if a.dtype.kind in "biuf" else None


def fixed_mask(atoms) -> np.ndarray:
    """1 for each atom an ASE ``FixAtoms`` constraint fixes, else 0 (int64, one an atom)."""
    from ase.constraints import FixAtoms

    mask = np.zeros(len(atoms), dtype=np.int64)
    for c in atoms.constraints:
        if isinstance(c, FixAtoms):
            mask[c.get_indices()] = 1
    return mask


def atoms_to_graph(atoms, extra: dict | None = None, skipped: set | None = None) -> dict:
    """One structure as a dict of arrays (see the module docstring)."""
    skipped = set() if skipped is None else skipped
    g = {
        "pos": np.asarray(atoms.positions, dtype=np.float64),
        "atomic_numbers": np.asarray(atoms.numbers, dtype=np.int64),
        "cell": np.asarray(atoms.cell.array, dtype=np.float64)[None],
        "pbc": np.asarray(atoms.pbc, dtype=bool)[None],
        "natoms": np.array([len(atoms)], dtype=np.int64),
        "tags": np.asarray(atoms.get_tags(), dtype=np.int64),
        "fixed": fixed_mask(atoms),
    }
    results = dict(atoms.calc.results) if atoms.calc is not None else {}
    for name, value in results.items():
        a = numeric(value)
        if a is None:
            skipped.add(name)
        elif name not in g:
            g[name] = a if (a.ndim and len(a) == len(atoms) and name != "stress") else a[None]
    for name, value in atoms.arrays.items():
        a = numeric(value)
        if name in _STANDARD:
            continue
        if a is None:
            skipped.add(name)
        elif name not in g:
            g[name] = a
    for source in (atoms.info, extra or {}):
        for name, value in source.items():
            a = numeric(value)
            if a is None:
                skipped.add(name)
            elif name not in g:
                g[name] = a[None]
    return g
