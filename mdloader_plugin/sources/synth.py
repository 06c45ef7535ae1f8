"""Synthetic graph data with realistic sizes, written in HydraGNN's ADIOS2 layout.

``hydragnn`` kind: molecule-like graphs of 5-100 atoms (most between 15 and 45, as in QM9/GDB-like
sets), positions from a random walk with 1.5 A bonds (each atom bonds to one of the three previous
ones), edges between atoms closer than a cutoff (1.9 A, both directions, no self loops), node
features ``x = [Z, covalent radius, valence]``, edge feature distance, graph target ``y`` = a sum of
per-element energies plus a pair term (learnable), and HydraGNN's ``y_loc`` head index. About
4.5 KB a graph. Molecules are made 256 at a time from one random stream (all walks by pointer
doubling, all edges by one k-d tree search), ~0.1 ms a graph instead of ~2 ms one by one.

``mlip`` kind: the same molecules with what an interatomic potential trains on: ``energy``
relative to the isolated atoms (the pair term ``sum exp(-d)`` over bonded pairs, a few eV) and
``forces [n,3]`` = minus its gradient, computed from the stored float32 positions, so energy and
forces agree exactly.

``oc20`` kind: periodic fcc(111) metal slabs (3-6 layers of 2x2..6x6 atoms, one of eight metals,
some alloyed) with a 1-8 atom C/H/O/N adsorbate, 30-220 atoms, in OC20's fields: ``pos``,
``atomic_numbers``, ``cell [1,3,3]``, ``pbc [1,3]``, ``natoms``, ``tags`` (0 subsurface, 1 surface,
2 adsorbate), ``fixed`` (the subsurface), ``energy``, ``forces [n,3]``, ``edge_index`` within
6 A with periodic images (nearest 30 a centre) and ``cell_offsets``. Records are ~25-200 KB;
~5-15 ms a graph (the neighbour search dominates).

Every graph is a function of ``(seed, index)`` only (of ``(seed, index // 256)`` for molecules),
so any slice of a data set can be regenerated
independently and two runs with the same seed write the same bytes.
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from ..core.blocks import exclusive_offsets

from .graph import radius_graph

# (Z, covalent radius in A, valence, per-atom energy in eV)
_ELEMENTS = np.array([
    (1, 0.31, 1, -13.6), (6, 0.76, 4, -1029.8), (7, 0.71, 3, -1484.3),
    (8, 0.66, 2, -2041.2), (9, 0.57, 1, -2713.9), (16, 1.05, 2, -10828.9),
], dtype=np.float64)
_ELEMENT_P = np.array([0.45, 0.35, 0.08, 0.08, 0.02, 0.02])

# fcc metals: (Z, lattice constant in A, per-atom reference energy in eV)
_METALS = np.array([(78, 3.92, -6.1), (29, 3.61, -3.7), (47, 4.09, -2.8), (79, 4.08, -3.2),
                    (46, 3.89, -5.2), (28, 3.52, -5.6), (45, 3.80, -7.3), (77, 3.84, -8.9)])
# adsorbate elements: (Z, per-atom reference energy in eV), probabilities
_ADS = np.array([(1, -3.4), (6, -7.3), (7, -8.3), (8, -7.2)])
_ADS_P = np.array([0.4, 0.3, 0.1, 0.2])


def molecule_sizes(rng: np.random.Generator, n: int) -> np.ndarray:
    """Atom counts in 5..100: log-normal around 27 atoms."""
    return np.clip(np.round(rng.lognormal(np.log(27.0), 0.45, size=n)), 5, 100).astype(np.int64)


def tree_positions(steps: np.ndarray, parent: np.ndarray, roots=(0,)) -> np.ndarray:
    """``pos[i] = pos[parent[i]] + steps[i]`` along a forest whose `roots` sit at 0, with
    ``parent[i] < i``: pointer doubling (log2(depth) vectorised rounds, no loop over atoms)."""
    acc = steps.copy()
    p = parent.copy()
    acc[list(roots)] = 0.0
    p[list(roots)] = roots
    for _ in range(max(int(np.ceil(np.log2(max(len(p), 2)))), 1)):
        acc = acc + acc[p]
        p = p[p]
    return acc


CHUNK = 256  # molecules are made 256 at a time from one random stream (vectorised)


def molecule(seed: int, index: int, cutoff: float = 1.9) -> dict[str, np.ndarray]:
    """Graph number `index` of the synthetic molecule set with `seed` (makes its whole chunk)."""
    return molecule_chunk(seed, index // CHUNK, cutoff)[index % CHUNK]


def molecule_chunk(seed: int, chunk: int, cutoff: float = 1.9) -> list[dict[str, np.ndarray]]:
    """Graphs ``chunk*CHUNK .. chunk*CHUNK+CHUNK-1`` of the molecule set, all at once: one
    pointer-doubling walk over every atom and one k-d tree pair search over the chunk."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng([seed, chunk])
    sizes = molecule_sizes(rng, CHUNK)
    starts = exclusive_offsets(sizes)
    graph = np.repeat(np.arange(CHUNK), sizes)
    local = np.arange(len(graph)) - starts[graph]
    el = _ELEMENTS[rng.choice(len(_ELEMENTS), size=len(graph), p=_ELEMENT_P)]
    steps = rng.normal(size=(len(graph), 3))
    steps *= 1.5 / np.linalg.norm(steps, axis=1, keepdims=True)
    parent = starts[graph] + np.maximum(local - 1 - rng.integers(0, 3, size=len(graph)), 0)
    pos = tree_positions(steps, parent, roots=starts)
    apart = pos + (1000.0 * graph)[:, None] * [1.0, 0.0, 0.0]  # graphs never see each other
    pairs = cKDTree(apart).query_pairs(cutoff, output_type="ndarray")
    src = np.concatenate([pairs[:, 0], pairs[:, 1]])
    dst = np.concatenate([pairs[:, 1], pairs[:, 0]])
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    dist = np.linalg.norm(pos[src] - pos[dst], axis=1)
    egraph = graph[src]
    energy = (np.bincount(graph, el[:, 3], CHUNK) + 0.5 * np.bincount(egraph, np.exp(-dist), CHUNK)
              + rng.normal(0, 0.05, size=CHUNK)) / sizes
    e_end = np.cumsum(np.bincount(egraph, minlength=CHUNK))
    x, pos32 = el[:, :3].astype(np.float32), pos.astype(np.float32)
    ei = np.stack([src - starts[egraph], dst - starts[egraph]])
    ea = dist.astype(np.float32)[:, None]
    out = []
    for g in range(CHUNK):
        a, b = starts[g], starts[g] + sizes[g]
        e0, e1 = (e_end[g - 1] if g else 0), e_end[g]
        out.append({"x": x[a:b], "pos": pos32[a:b], "edge_index": ei[:, e0:e1],
                    "edge_attr": ea[e0:e1], "y": energy[g:g + 1].astype(np.float32),
                    "y_loc": np.array([[0, 1]], dtype=np.int64)})
    return out


def molecules(seed: int, start: int, stop: int) -> Iterator[dict[str, np.ndarray]]:
    """Graphs ``start..stop-1`` of the molecule set, chunk by chunk."""
    for c in range(start // CHUNK, (stop + CHUNK - 1) // CHUNK):
        chunk = molecule_chunk(seed, c)
        lo, hi = max(start - c * CHUNK, 0), min(stop - c * CHUNK, CHUNK)
        yield from chunk[lo:hi]


def _slab_shape(rng: np.random.Generator) -> tuple[int, int, int, int]:
    """(nx, ny, layers, adsorbate atoms) with 30..220 atoms in all."""
    while True:
        nx, ny = rng.integers(2, 7, size=2)
        layers, n_ads = int(rng.integers(3, 7)), int(rng.integers(1, 9))
        if 30 <= nx * ny * layers + n_ads <= 220:
            return int(nx), int(ny), layers, n_ads


def _fcc111(nx: int, ny: int, layers: int, a: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lattice sites, layer index of each site and the cell of an fcc(111) slab (15 A vacuum)."""
    d, h = a / np.sqrt(2), a / np.sqrt(3)
    a1, a2 = np.array([d, 0, 0]), np.array([d / 2, d * np.sqrt(3) / 2, 0])
    iy, ix = np.divmod(np.arange(nx * ny), nx)
    plane = ix[:, None] * a1 + iy[:, None] * a2
    shift = (a1 + a2) / 3
    sites = np.concatenate([plane + (l % 3) * shift + [0, 0, 2 + l * h] for l in range(layers)])
    layer = np.repeat(np.arange(layers), nx * ny)
    cell = np.stack([nx * a1, ny * a2, [0, 0, 2 + (layers - 1) * h + 15.0]])
    return sites, layer, cell


def mlip_molecules(seed: int, start: int, stop: int) -> Iterator[dict[str, np.ndarray]]:
    """Molecules ``start..stop-1`` with pair ``energy`` and consistent ``forces``."""
    for g in molecules(seed, start, stop):
        pos = g["pos"].astype(np.float64)
        src, dst = g["edge_index"]  # both directions of every bonded pair
        diff = pos[src] - pos[dst]
        dist = np.linalg.norm(diff, axis=1)
        pull = (np.exp(-dist) / dist)[:, None] * diff  # -d/dr_src of exp(-|r_src - r_dst|)
        forces = np.zeros_like(pos)
        np.add.at(forces, src, pull)
        energy = 0.5 * np.exp(-dist).sum()
        yield {**g, "energy": np.array([energy], dtype=np.float32),
               "forces": forces.astype(np.float32)}


def slab(seed: int, index: int, radius: float = 6.0, max_neighbours: int = 30
         ) -> dict[str, np.ndarray]:
    """Structure number `index` of the synthetic OC20-like slab+adsorbate set with `seed`."""
    rng = np.random.default_rng([seed, index, 20])
    nx, ny, layers, n_ads = _slab_shape(rng)
    metals = _METALS[rng.choice(len(_METALS), size=2, replace=False)]
    sites, layer, cell = _fcc111(nx, ny, layers, float(metals[0, 1]))
    alloy = rng.random(len(sites)) < rng.choice([0.0, 0.25, 0.5])
    z_slab = np.where(alloy, metals[1, 0], metals[0, 0])
    tags = np.where(layer >= layers - 2, 1, 0)
    disp = rng.normal(0, 0.05, size=sites.shape) * (tags[:, None] == 1)
    ads = _ADS[rng.choice(len(_ADS), size=n_ads, p=_ADS_P)]
    steps = rng.normal(size=(n_ads, 3))
    steps[:, 2] = np.abs(steps[:, 2])
    steps *= 1.2 / np.linalg.norm(steps, axis=1, keepdims=True)
    anchor = rng.random(2) @ cell[:2] + [0, 0, sites[:, 2].max() + 2.0]
    ads_pos = anchor + tree_positions(steps, np.maximum(np.arange(n_ads) - 1, 0))
    pos = np.concatenate([sites + disp, ads_pos])
    numbers = np.concatenate([z_slab, ads[:, 0]]).astype(np.int64)
    tags = np.concatenate([tags, np.full(n_ads, 2)]).astype(np.int64)
    pbc = np.ones(3, dtype=bool)
    edge_index, offsets, dist = radius_graph(pos, radius, cell, pbc, max_neighbours)
    e_ref = np.where(alloy, metals[1, 2], metals[0, 2]).sum() + ads[:, 1].sum()
    energy = e_ref + 10.0 * np.sum(disp ** 2) + 0.05 * np.sum(np.exp(-dist)) + rng.normal(0, 0.1)
    forces = np.concatenate([-20.0 * disp, rng.normal(0, 0.3, size=(n_ads, 3))])
    return {
        "pos": pos.astype(np.float32),
        "atomic_numbers": numbers,
        "cell": cell.astype(np.float32)[None],
        "pbc": pbc[None],
        "natoms": np.array([len(pos)], dtype=np.int64),
        "tags": tags,
        "fixed": (tags == 0).astype(np.int64),
        "energy": np.array([energy], dtype=np.float32),
        "forces": forces.astype(np.float32),
        "edge_index": edge_index,
        "cell_offsets": offsets.astype(np.float32),
    }


KINDS: dict[str, Callable[[int, int], dict[str, np.ndarray]]] = {
    "hydragnn": molecule, "mlip": molecule, "oc20": slab}


def generate(kind: str, seed: int, start: int, stop: int) -> Iterator[dict[str, np.ndarray]]:
    """Graphs ``start..stop-1`` of a synthetic set."""
    try:
        make = KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown synthetic kind {kind!r}; "
                         f"choose one of {sorted(KINDS)}") from None
    if kind == "hydragnn":
        return molecules(seed, start, stop)
    if kind == "mlip":
        return mlip_molecules(seed, start, stop)
    return (make(seed, i) for i in range(start, stop))


def split_counts(n: int, fractions: tuple[float, ...]) -> list[int]:
    """Deterministic label sizes for `n` graphs (the remainder goes to the first label)."""
    counts = [int(n * f) for f in fractions]
    counts[0] += n - sum(counts)
    return counts
