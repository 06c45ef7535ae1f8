"""sources/graph: radius graphs with periodic images, on cells whose neighbours are known."""

import numpy as np
import pytest

from mdloader_plugin.sources.graph import image_shifts, radius_graph


def test_simple_cubic_atom_has_its_six_images_as_neighbours():
    ei, shifts, d = radius_graph(np.zeros((1, 3)), 2.1, cell=2.0 * np.eye(3), pbc=[1, 1, 1])
    assert ei.tolist() == [[0] * 6, [0] * 6]
    assert sorted(map(tuple, shifts.tolist())) == sorted(
        [(1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)])
    assert np.allclose(d, 2.0)


def test_edge_vector_convention():
    pos = np.array([[0.1, 0.0, 0.0], [1.9, 0.0, 0.0]])
    cell = np.diag([2.0, 10.0, 10.0])
    ei, s, d = radius_graph(pos, 0.5, cell=cell, pbc=[1, 0, 0])
    assert ei.shape == (2, 2) and np.allclose(d, 0.2)
    for (j, i), shift, dist in zip(ei.T, s, d):  # pos[j] + S @ cell - pos[i] is the edge vector
        assert np.isclose(np.linalg.norm(pos[j] + shift @ cell - pos[i]), dist)


def test_molecule_without_cell_and_nearest_k():
    pos = np.array([[0.0, 0, 0], [1.0, 0, 0], [3.0, 0, 0], [3.5, 0, 0]])
    ei, s, d = radius_graph(pos, 1.5)
    edges = sorted(map(tuple, ei.T.tolist()))
    assert edges == [(0, 1), (1, 0), (2, 3), (3, 2)] and not s.any()
    ei, _, d = radius_graph(pos, 10.0, max_neighbours=1)  # each centre keeps its nearest one
    assert ei[1].tolist() == [0, 1, 2, 3] and ei[0].tolist() == [1, 0, 3, 2]
    assert np.allclose(d, [1.0, 1.0, 0.5, 0.5])


def test_sorted_by_centre_then_distance():
    rng = np.random.default_rng(1)
    ei, _, d = radius_graph(rng.uniform(0, 5, size=(30, 3)), 2.0)
    key = list(zip(ei[1].tolist(), d.tolist()))
    assert key == sorted(key)


def test_empty_and_degenerate():
    ei, s, d = radius_graph(np.zeros((0, 3)), 1.0)
    assert ei.shape == (2, 0) and s.shape == (0, 3) and d.shape == (0,)
    with pytest.raises(ValueError,
                       match=r"^the cell is degenerate \(zero volume\) but pbc is set$"):
        image_shifts(np.zeros((3, 3)), np.array([True, False, False]), 1.0)
    assert image_shifts(np.eye(3), np.zeros(3, bool), 5.0).tolist() == [[0, 0, 0]]
