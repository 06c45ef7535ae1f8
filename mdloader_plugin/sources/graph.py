"""Radius graphs with periodic images (scipy's k-d tree; no torch-cluster or pyg-lib needed).

Convention (the one fairchem's ``radius_graph_pbc`` and PyG's ``source_to_target`` flow use):
``edge_index[0]`` is the neighbour ``j`` (message source), ``edge_index[1]`` the centre ``i``,
and ``cell_offsets[e]`` the integer image shift ``S`` with ``pos[j] + S @ cell - pos[i]`` the
edge vector (ASE's ``neighbor_list("ijS")`` convention). With ``max_neighbours`` each centre
keeps its nearest ``K`` neighbours (ties broken by neighbour index and shift, deterministic).

Method: replicate the atoms over every image shift that can reach within `radius` (per periodic
direction ``ceil(radius / distance between the cell's opposite faces)`` images each way), then one
``sparse_distance_matrix`` between the atoms and their images. The edge set equals ASE's
``primitive_neighbor_list`` (tested) and is 10-50x faster on 50-220-atom slabs with 6 A
(2-15 ms versus 70-500 ms here); memory is atoms x images, fine for the small cells of
catalysis data but not for a 10^5-atom box with a tiny cell.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


def image_shifts(cell: np.ndarray, pbc: np.ndarray, radius: float) -> np.ndarray:
    """Integer shifts ``[M, 3]`` of every periodic image that can hold a neighbour."""
    n_img = np.zeros(3, dtype=np.int64)
    if pbc.any():
        vol = abs(float(np.linalg.det(cell)))
        if vol < 1e-9:
            raise ValueError("the cell is degenerate (zero volume) but pbc is set")
        for k in np.nonzero(pbc)[0]:
            face = np.linalg.norm(np.cross(cell[(k + 1) % 3], cell[(k + 2) % 3]))
            n_img[k] = int(np.ceil(radius * face / vol))
    axes = [np.arange(-m, m + 1) for m in n_img]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)


def radius_graph(pos: np.ndarray, radius: float, cell: np.ndarray | None = None,
                 pbc: np.ndarray | None = None, max_neighbours: int | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges within `radius` (both directions, no self loops at zero shift).

    Returns ``(edge_index int64 [2, E], cell_offsets int64 [E, 3], distances float64 [E])``,
    sorted by centre, then distance.
    """
    from scipy.spatial import cKDTree

    pos = np.asarray(pos, dtype=np.float64).reshape(-1, 3)
    cell = np.zeros((3, 3)) if cell is None else np.asarray(cell, np.float64).reshape(3, 3)
    pbc = np.zeros(3, bool) if pbc is None else np.asarray(pbc, bool).reshape(3)
    n = len(pos)
    if n == 0:
        return np.zeros((2, 0), np.int64), np.zeros((0, 3), np.int64), np.zeros(0)
    shifts = image_shifts(cell, pbc, radius)
    images = (pos[None, :, :] + (shifts @ cell)[:, None, :]).reshape(-1, 3)
    sdm = cKDTree(pos).sparse_distance_matrix(cKDTree(images), radius, output_type="ndarray")
    i, d = sdm["i"].astype(np.int64), sdm["v"]
    m, j = np.divmod(sdm["j"].astype(np.int64), n)
    s = shifts[m]
    keep = ~((i == j) & ~s.any(axis=1))
    i, j, d, s = i[keep], j[keep], d[keep], s[keep]
    order = np.lexsort((s[:, 2], s[:, 1], s[:, 0], j, d, i))
    i, j, d, s = i[order], j[order], d[order], s[order]
    graph = np.stack([j, i]), s, d
    return graph if max_neighbours is None else nearest(*graph, max_neighbours).graph


class Nearest(NamedTuple):
    """A radius graph cut to each centre's nearest ``K`` neighbours, and what the cut left out."""

    graph: tuple[np.ndarray, np.ndarray, np.ndarray]  #: as :func:`radius_graph` returns it
    dropped: int  #: edges beyond ``K`` (0: no centre had more than ``K`` neighbours)
    most: int  #: the most neighbours one centre had within the radius
    centre: int  #: that centre's atom


def nearest(edge_index: np.ndarray, shifts: np.ndarray, dist: np.ndarray,
            max_neighbours: int) -> Nearest:
    """Each centre's nearest `max_neighbours` edges of a :func:`radius_graph` (sorted by centre,
    then distance), and how many it dropped (upstream HydraGNN's ``neighbor_overflow``: truncate
    counts them, error refuses them)."""
    i = edge_index[1]
    if not len(i):
        return Nearest((edge_index, shifts, dist), 0, 0, 0)
    first = np.searchsorted(i, i, side="left")
    keep = (np.arange(len(i)) - first) < max_neighbours
    degree = np.bincount(i)
    centre = int(np.argmax(degree))
    return Nearest((edge_index[:, keep], shifts[keep], dist[keep]), int(len(i) - keep.sum()),
                   int(degree[centre]), centre)
