"""Synthetic graph data with realistic sizes, written in HydraGNN's ADIOS2 layout.

``hydragnn`` kind: molecule-like graphs of 5-100 atoms (most between 15 and 45, as in QM9/GDB-like
sets), positions from a self-avoiding random walk with ~1.5 A bonds, edges between atoms closer than
a cutoff (1.9 A by default, both directions, no self loops), node features
``x = [Z, covalent radius, valence]``, edge feature distance, graph target ``y`` = a sum of
per-element energies plus a pair term (learnable), and HydraGNN's ``y_loc`` head index.

Every graph is a function of ``(seed, index)`` only, so any slice of a data set can be regenerated
independently and two runs with the same seed write the same bytes.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

# (Z, covalent radius in A, valence, per-atom energy in eV)
_ELEMENTS = np.array([
    (1, 0.31, 1, -13.6), (6, 0.76, 4, -1029.8), (7, 0.71, 3, -1484.3),
    (8, 0.66, 2, -2041.2), (9, 0.57, 1, -2713.9), (16, 1.05, 2, -10828.9),
], dtype=np.float64)
_ELEMENT_P = np.array([0.45, 0.35, 0.08, 0.08, 0.02, 0.02])


def molecule_sizes(rng: np.random.Generator, n: int) -> np.ndarray:
    """Atom counts in 5..100: log-normal around 27 atoms."""
    return np.clip(np.round(rng.lognormal(np.log(27.0), 0.45, size=n)), 5, 100).astype(np.int64)


def molecule(seed: int, index: int, cutoff: float = 1.9) -> dict[str, np.ndarray]:
    """Graph number `index` of the synthetic molecule set with `seed`."""
    rng = np.random.default_rng([seed, index])
    n = int(molecule_sizes(rng, 1)[0])
    el = _ELEMENTS[rng.choice(len(_ELEMENTS), size=n, p=_ELEMENT_P)]
    pos = np.zeros((n, 3))
    for i in range(1, n):  # random walk; each atom bonds to a recent one
        anchor = pos[max(0, i - 1 - int(rng.integers(0, 3)))]
        step = rng.normal(size=3)
        pos[i] = anchor + 1.5 * step / np.linalg.norm(step)
    d = np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=-1)
    src, dst = np.nonzero((d < cutoff) & ~np.eye(n, dtype=bool))
    dist = d[src, dst]
    energy = el[:, 3].sum() + 0.5 * np.sum(np.exp(-dist)) + rng.normal(0, 0.05)
    return {
        "x": np.stack([el[:, 0], el[:, 1], el[:, 2]], axis=1).astype(np.float32),
        "pos": pos.astype(np.float32),
        "edge_index": np.stack([src, dst]).astype(np.int64),
        "edge_attr": dist.astype(np.float32)[:, None],
        "y": np.array([energy / n], dtype=np.float32),
        "y_loc": np.array([[0, 1]], dtype=np.int64),
    }


KINDS = {"hydragnn": molecule}


def generate(kind: str, seed: int, start: int, stop: int) -> Iterator[dict[str, np.ndarray]]:
    """Graphs ``start..stop-1`` of a synthetic set."""
    try:
        make = KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown synthetic kind {kind!r}; choose one of {sorted(KINDS)}") from None
    return (make(seed, i) for i in range(start, stop))


def split_counts(n: int, fractions: tuple[float, ...]) -> list[int]:
    """Deterministic label sizes for `n` graphs (the remainder goes to the first label)."""
    counts = [int(n * f) for f in fractions]
    counts[0] += n - sum(counts)
    return counts
