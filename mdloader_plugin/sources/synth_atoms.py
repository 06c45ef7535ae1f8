"""Small labelled atomistic data sets of three kinds, as ASE ``Atoms`` (EMT energies and forces).

* ``slabs``: OC20-like fcc(111) slabs of one EMT metal (Al, Cu, Ag, Au, Ni, Pd, Pt), 2x2 or 3x2
  in plane and 3 layers deep, with one adsorbate (H, C, N, O, OH, CO) on a random site, random
  displacements (sigma 0.05 A) and 7 A of vacuum: 13-20 atoms, periodic in x and y. Tags follow
  OC20 (0 subsurface, 1 surface, 2 adsorbate) and the bottom layer is fixed (``FixAtoms``).
* ``molecules``: small H/C/N/O molecules from ASE's g2 set, rattled (sigma 0.05 A), no cell, no
  periodicity: 2-10 atoms.
* ``bulk``: cubic fcc cells of one EMT metal repeated 1x1x1 .. 2x2x1, lattice constant scaled by
  0.97-1.03 and rattled (sigma 0.05 A), periodic in 3 directions: 4-16 atoms.

Energies and forces come from ASE's EMT: real, cheap (~1 ms a structure) and learnable.
(OC20 systems are larger, ~80 atoms; the sizes here keep CPU tests under a minute.) Every
structure is a function of ``(seed, index)`` only, so the ASE-LMDB written for fairchem's own
loader and the ADIOS2 file written for MDLoader hold exactly the same systems. :func:`record`
turns a structure into the graph both front ends read: fairchem's fields (``pos``,
``atomic_numbers``, ``cell``, ``pbc``, ``natoms``, ``tags``, ``fixed``, ``energy``, ``forces``,
``sid``) plus HydraGNN's (``x = [Z]``, ``y`` = energy per atom, ``y_loc``, ``edge_index`` and
``cell_offsets`` within 5 A with periodic images).
"""

from __future__ import annotations

import functools
import os
from typing import Callable, Iterator

import numpy as np
from .convert.atoms import atoms_to_graph
from .graph import radius_graph
from .writer import write_graphs

METALS = ("Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt")
ADSORBATES = ("H", "C", "N", "O", "OH", "CO")
SITES = ("ontop", "bridge", "fcc", "hcp")


def slab(seed: int, index: int):
    """Structure number `index` of the set with `seed`: an ``ase.Atoms`` with EMT results frozen
    in a ``SinglePointCalculator`` and ``info['sid']`` set."""
    from ase.build import add_adsorbate, fcc111, molecule
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
    return _labelled(atoms, rng, index)


def _labelled(atoms, rng: np.random.Generator, index: int):
    """Rattle (sigma 0.05 A), freeze EMT's energy and forces, set ``info['sid']``."""
    from ase.calculators.emt import EMT
    from ase.calculators.singlepoint import SinglePointCalculator

    atoms.positions += rng.normal(0.0, 0.05, size=atoms.positions.shape)
    atoms.calc = EMT()
    energy, forces = atoms.get_potential_energy(), atoms.get_forces()
    atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=forces)
    atoms.info["sid"] = str(index)
    return atoms


MOLECULES = ("H2", "H2O", "NH3", "CH4", "CO", "CO2", "N2", "O2", "HCN", "C2H2", "C2H4", "C2H6",
             "CH3OH", "HCOOH", "CH3CHO", "H2O2", "N2H4")


def molecule(seed: int, index: int):
    """Molecule number `index`: a g2 H/C/N/O molecule, no cell, not periodic (EMT labels)."""
    rng = np.random.default_rng([seed, index, 1])
    return _labelled(_g2(MOLECULES[rng.integers(len(MOLECULES))]).copy(), rng, index)


@functools.lru_cache(maxsize=None)
def _g2(name: str):
    """ASE's g2 molecule (building one re-reads ASE's collection: ~0.4 s; cached)."""
    from ase.build import molecule as g2

    return g2(name)


def bulk(seed: int, index: int):
    """Crystal number `index`: a cubic fcc cell of one metal, 1x1x1..2x2x1, strained +-3%."""
    from ase.build import bulk as fcc

    rng = np.random.default_rng([seed, index, 2])
    metal = METALS[rng.integers(len(METALS))]
    atoms = fcc(metal, "fcc", cubic=True)
    atoms.set_cell(atoms.cell * rng.uniform(0.97, 1.03), scale_atoms=True)
    reps = [(1, 1, 1), (2, 1, 1), (2, 2, 1)][rng.integers(3)]
    return _labelled(atoms.repeat(reps), rng, index)


def slabs(seed: int, start: int, stop: int) -> Iterator:
    """Structures ``start..stop-1``."""
    for i in range(start, stop):
        yield slab(seed, i)


KINDS: dict[str, Callable] = {"molecules": molecule, "slabs": slab, "bulk": bulk}


def structures(kind: str, seed: int, start: int, stop: int) -> Iterator:
    """Structures ``start..stop-1`` of `kind` (one of :data:`KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown structure kind {kind!r}; choose one of {', '.join(KINDS)}")
    return (KINDS[kind](seed, i) for i in range(start, stop))


def record(atoms, index: int, cutoff: float = 5.0) -> dict[str, np.ndarray]:
    """The graph both front ends read (see the module docstring)."""
    g = atoms_to_graph(atoms, extra={"sid": index})
    g = {k: g[k] for k in ("pos", "atomic_numbers", "cell", "pbc", "natoms", "tags", "fixed",
                           "energy", "forces", "sid")}
    g["sid"] = np.array([index], dtype=np.int64)
    ei, shifts, _ = radius_graph(g["pos"], cutoff, g["cell"][0], g["pbc"][0])
    n = len(atoms)
    g.update(x=g["atomic_numbers"].astype(np.float32).reshape(n, 1),
             y=(g["energy"] / n).astype(np.float32).reshape(1),
             y_loc=np.array([[0, 1]], dtype=np.int64), edge_index=ei,
             cell_offsets=shifts.astype(np.float32))
    return g


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


SPLITS = (("trainset", "train"), ("valset", "val"), ("testset", "test"))


def write_set(out_dir: str, kind: str, counts, seed: int = 0, aselmdb: bool = False) -> str:
    """``out_dir/<kind>.bp`` with ``counts`` structures in trainset/valset/testset (empty labels
    left out) and ``dataset_name`` = `kind`; with `aselmdb` the same structures also as
    ``out_dir/<kind>/<split>/data.aselmdb``. Structure ids run on across the labels."""
    graphs, start = {}, 0
    for (label, split), n in zip(SPLITS, counts):
        if n == 0:
            continue
        atoms = list(structures(kind, seed, start, start + n))
        graphs[label] = [record(a, start + i) for i, a in enumerate(atoms)]
        if aselmdb:
            folder = os.path.join(out_dir, kind, split)
            os.makedirs(folder, exist_ok=True)
            write_aselmdb(os.path.join(folder, "data.aselmdb"), atoms)
        start += n
    path = os.path.join(out_dir, f"{kind}.bp")
    write_graphs(path, graphs, attributes={"dataset_name": kind})
    return path


# -- upstream HydraGNN's multi-data-set layout ("gfm") -----------------------------------------
#: Upstream's ``AbstractBaseDataset`` routes a file's ``dataset_name`` to a branch by this order
#: (``ani1x`` -> 0, ``qm7x`` -> 1, ...): default names of ``mdloader synth --kind gfm``.
GFM_NAMES = ("ani1x", "qm7x", "mptrj", "alexandria", "transition1x", "omat24", "oc2020_all",
             "oc2022", "omol25", "qcml", "odac23", "nabla2dft", "oc2025", "opoly2026")


def gfm_record(atoms, cutoff: float = 5.0) -> dict[str, np.ndarray]:
    """One graph as upstream's multi-data-set scripts read it (``examples/multibranch``,
    ``examples/multidataset``, ``examples/multidataset_hpo_sc26``): ``x`` = atomic number,
    positions, forces (node feature dims 1, 3, 3), ``edge_index``, ``edge_attr`` (edge length),
    ``pos``, ``energy``, ``energy_per_atom``, ``forces``, ``y`` = energy per atom (the graph
    feature), and what the SC26 scripts read besides: ``atomic_numbers`` (``[n, 1]``),
    ``natoms`` (``[1]`` int32), ``cell`` (zeros without one), ``pbc`` (int32, as upstream stores
    it), ``edge_shifts`` (Cartesian image shifts), ``chemical_composition`` (atoms of each
    element 1..118) and ``graph_attr`` (charge 0, spin 1); floats as float32 and ``energy``,
    ``energy_per_atom`` as ``[1, 1]``, as upstream's preprocessing writes them."""
    pos = atoms.get_positions()
    n = len(atoms)
    pbc = np.asarray(atoms.get_pbc(), dtype=bool)
    cell = np.asarray(atoms.get_cell()) if pbc.any() else np.zeros((3, 3))
    ei, offsets, dist = radius_graph(pos, cutoff, cell if pbc.any() else None,
                                     pbc if pbc.any() else None)
    energy = np.float32(atoms.get_potential_energy())
    forces = atoms.get_forces().astype(np.float32)
    numbers = atoms.get_atomic_numbers()
    z = numbers.astype(np.float32).reshape(n, 1)
    return {"x": np.concatenate([z, pos.astype(np.float32), forces], axis=1),
            "edge_index": ei.astype(np.int64), "edge_attr": dist.astype(np.float32).reshape(-1, 1),
            "pos": pos.astype(np.float32), "atomic_numbers": z,
            "energy": np.array([[energy]], dtype=np.float32),
            "energy_per_atom": np.array([[energy / n]], dtype=np.float32),
            "forces": forces, "y": np.array([energy / n], dtype=np.float32),
            "natoms": np.array([n], dtype=np.int32), "cell": cell.astype(np.float32),
            "pbc": pbc.astype(np.int32),
            "edge_shifts": (offsets.astype(np.float64) @ cell).astype(np.float32).reshape(-1, 3),
            "chemical_composition": np.bincount(numbers - 1, minlength=118)[:118].astype(
                np.float32).reshape(118, 1),
            "graph_attr": np.array([0.0, 1.0], dtype=np.float32)}


def compile_named(rec: dict, variables: dict) -> dict:
    """`rec` with ``x``, ``y``, ``y_loc`` (and ``edge_attr``/``graph_attr`` where inputs of
    those levels are named) compiled from a named data schema (a config's ``Variables``:
    ``inputs``/``outputs`` of ``{name, level, dim, role}``), as upstream's
    ``prepare_data_from_schema`` compiles them: feature inputs of a level joined, outputs
    flattened into one ``y`` column with ``y_loc`` the head boundaries. HydraGNN main527's
    datasets serve the file's ``x``/``y``/``y_loc`` as written, so its scripts need them."""
    out = dict(rec)
    n = len(rec["pos"])
    rows = {"node": n, "graph": 1, "edge": rec["edge_index"].shape[1]}
    keys = {"node": "x", "edge": "edge_attr", "graph": "graph_attr"}

    def named(spec: dict) -> np.ndarray:
        if spec["name"] not in rec:
            raise ValueError(f"Variables: {spec['name']!r} is not a key of the gfm layout "
                             f"(keys: {', '.join(rec)})")
        return np.asarray(rec[spec["name"]]).reshape(rows[spec["level"]], int(spec["dim"]))

    for level, key in keys.items():
        cols = [named(s) for s in variables["inputs"]
                if s["level"] == level and s.get("role", "feature") == "feature"]
        if cols:
            out[key] = np.ascontiguousarray(np.concatenate(cols, axis=1), dtype=np.float32)
    ys = [named(s).reshape(-1, 1).astype(np.float32) for s in variables["outputs"]]
    out["y"] = np.concatenate(ys, axis=0)
    out["y_loc"] = np.cumsum([0] + [len(y) for y in ys]).astype(np.int64).reshape(1, -1)
    return out


def write_gfm_set(out_dir: str, name: str, kind: str, counts, seed: int = 0,
                  variables: dict | None = None) -> str:
    """``out_dir/<name>.bp`` in upstream's multi-data-set layout (:func:`gfm_record`): `counts`
    structures of `kind` in trainset/valset/testset, the file attribute ``dataset_name`` = `name`
    (upstream's dataset attaches its id from it) and ``pna_deg`` (the train set's in-degree
    histogram, which upstream's multibranch script merges). With `variables` (a named data
    schema) ``x``/``y``/``y_loc`` are compiled from it (:func:`compile_named`)."""
    graphs, start = {}, 0
    for (label, _), n in zip(SPLITS, counts):
        atoms = list(structures(kind, seed, start, start + n))
        graphs[label] = [gfm_record(a) if variables is None else
                         compile_named(gfm_record(a), variables) for a in atoms]
        start += n
    deg = np.zeros(1, dtype=np.int64)
    for g in graphs["trainset"]:
        d = np.bincount(np.bincount(g["edge_index"][1], minlength=len(g["x"])))
        deg = np.pad(deg, (0, max(0, d.size - deg.size)))
        deg[:d.size] += d
    path = os.path.join(out_dir, f"{name}.bp")
    write_graphs(path, graphs, attributes={"dataset_name": name, "pna_deg": deg},
                 vdims={"edge_index": 1, "edge_attr": 0, "edge_shifts": 0,
                        **({"y": 0} if variables is not None else {})})
    return path
