"""Synthetic OC20-like slabs with adsorbates, labelled by ASE's EMT, for fairchem tests and demos.

Each structure is an fcc(111) slab of one EMT metal (Al, Cu, Ag, Au, Ni, Pd, Pt), 2x2 or 3x2 in
plane and 3 layers deep, with one adsorbate (H, C, N, O, OH, CO) on a random site, random
displacements (sigma 0.05 A) and 7 A of vacuum: 13-20 atoms, periodic in x and y, a few A of
cell in z (OC20 systems are larger, ~80 atoms; the sizes here keep CPU tests under a minute). Tags
follow OC20 (0 subsurface, 1 surface, 2 adsorbate) and the bottom layer is fixed (``FixAtoms``).
Energies and forces come from EMT: real, cheap (~1 ms a structure) and learnable.

Every structure is a function of ``(seed, index)`` only, so the ASE-LMDB written for fairchem's
own loader and the ADIOS2 file written for MDLoader hold exactly the same systems.
"""

from __future__ import annotations

import os
from typing import Iterator

import numpy as np

METALS = ("Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt")
ADSORBATES = ("H", "C", "N", "O", "OH", "CO")
SITES = ("ontop", "bridge", "fcc", "hcp")


def slab(seed: int, index: int):
    """Structure number `index` of the set with `seed`: an ``ase.Atoms`` with EMT results frozen
    in a ``SinglePointCalculator`` and ``info['sid']`` set."""
    from ase.build import add_adsorbate, fcc111, molecule
    from ase.calculators.emt import EMT
    from ase.calculators.singlepoint import SinglePointCalculator
    from ase.constraints import FixAtoms

    rng = np.random.default_rng([seed, index])
    size = (2, 2, 3) if rng.random() < 0.6 else (3, 2, 3)
    atoms = fcc111(METALS[rng.integers(len(METALS))], size=size, vacuum=7.0)
    ads = ADSORBATES[rng.integers(len(ADSORBATES))]
    add_adsorbate(atoms, molecule(ads) if len(ads) > 1 else ads,
                  height=1.2 + 0.6 * rng.random(), position=SITES[rng.integers(len(SITES))])
    layer = atoms.get_tags()  # ASE tags slab layers 1 (top) .. size[2] (bottom), adsorbate 0
    atoms.set_tags(np.select([layer == 0, layer == 1], [2, 1], 0))
    atoms.set_constraint(FixAtoms(indices=np.nonzero(layer == size[2])[0]))
    atoms.positions += rng.normal(0.0, 0.05, size=atoms.positions.shape)
    atoms.calc = EMT()
    energy, forces = atoms.get_potential_energy(), atoms.get_forces()
    atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=forces)
    atoms.info["sid"] = str(index)
    return atoms


def slabs(seed: int, start: int, stop: int) -> Iterator:
    """Structures ``start..stop-1``."""
    for i in range(start, stop):
        yield slab(seed, i)


def write_aselmdb(path: str | os.PathLike, atoms_list) -> None:
    """Write structures to an ASE-LMDB (what fairchem's ``ase_db`` dataset reads), plus the
    ``metadata.npz`` with ``natoms`` beside it that fairchem's atom-balanced sampler reads."""
    import ase.db

    path = os.fspath(path)
    if os.path.exists(path):
        os.remove(path)
    natoms = []
    with ase.db.connect(path, type="aselmdb") as db:
        for atoms in atoms_list:
            db.write(atoms, data={"sid": atoms.info["sid"]})
            natoms.append(len(atoms))
    np.savez(os.path.join(os.path.dirname(os.path.abspath(path)), "metadata.npz"),
             natoms=np.asarray(natoms, dtype=np.int64))
