"""Converters into HydraGNN's ADIOS2 layout: one module a source, a registry by name.

Every source module defines ``NAME``, ``accepts(path) -> bool`` (guess from the path),
``count(path) -> int`` and ``iterate(path) -> Iterator[dict[str, np.ndarray]]`` yielding one graph
at a time in the source's order. :func:`convert` streams them through :class:`GraphWriter`, so
memory is one graph plus the writer's block (the PyG ``.pt`` source is the exception: an
in-memory dataset is one collated tensor set, loaded once).

Splits are deterministic: ``numpy.random.default_rng(seed).permutation(count)`` assigns the first
``round(f_train * n)`` positions (by the rule of ``synth.split_counts``) to trainset, then valset,
testset, so the same input and seed give the same files. Within a label graphs keep source order.

Fields: the first structure's fields define the file's; later extra fields are dropped (one
warning), a missing one is an error naming the structure.

Graph building: if a graph has no ``edge_index`` and ``radius > 0``, edges within `radius` are built
(periodic images when a cell with pbc is present, see ``sources.graph``) with ``cell_offsets``.
Floats are stored as float32 unless ``float64=True``; integers as int64; bools as uint8.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Iterator

import numpy as np

from ...core.errors import ConfigError, DataError
from ..graph import radius_graph
from ..synth import split_counts
from ..writer import GraphWriter

LABELS = ("trainset", "valset", "testset")


def _registry() -> dict:
    from . import asedb, extxyz, g2, oc20lmdb, pyg

    return {m.NAME: m for m in (asedb, oc20lmdb, extxyz, pyg, g2)}


def detect(path: str, kind: str | None = None):
    """The source module for `path` (or the one named `kind`)."""
    reg = _registry()
    if kind:
        if kind not in reg:
            raise ConfigError(f"--from {kind!r} is unknown; choose one of {', '.join(reg)}")
        return reg[kind]
    for mod in reg.values():
        if mod.accepts(path):
            return mod
    raise ConfigError(f"{path}: cannot tell the input format from the name; pass --from with one "
                      f"of {', '.join(reg)}")


def assign_labels(n: int, split: tuple[float, float, float], seed: int) -> np.ndarray:
    """Label number (0 train, 1 val, 2 test) of every source index, deterministic in `seed`."""
    counts = split_counts(n, split)
    order = np.random.default_rng(seed).permutation(n)
    out = np.empty(n, dtype=np.int8)
    out[order] = np.repeat(np.arange(3, dtype=np.int8), counts)
    return out


def finish_graph(g: dict, radius: float, max_neighbours: int | None,
                 float64: bool = False) -> dict[str, np.ndarray]:
    """Stored dtypes, ``natoms``, and a radius graph when edges are absent."""
    out = {}
    for k, v in g.items():
        a = np.asarray(v)
        if a.dtype.kind == "f" and not float64:
            a = a.astype(np.float32)
        elif a.dtype.kind in "iu" and a.dtype != np.uint8:
            a = a.astype(np.int64)
        out[k] = a
    pos = out.get("pos")
    if pos is not None and "natoms" not in out:
        out["natoms"] = np.array([len(pos)], dtype=np.int64)
    if pos is not None and "edge_index" not in out and radius > 0:
        cell, pbc = out.get("cell"), out.get("pbc")
        try:
            ei, offs, _ = radius_graph(pos, radius, cell, pbc, max_neighbours)
        except ValueError as exc:
            raise DataError(f"cannot build the radius graph: {exc}") from None
        out["edge_index"] = ei
        if cell is not None:
            out["cell_offsets"] = offs.astype(np.float64 if float64 else np.float32)
    return out


def convert(path: str, out: str, *, kind: str | None = None,
            split: tuple[float, float, float] = (1.0, 0.0, 0.0), seed: int = 0,
            radius: float = 6.0, max_neighbours: int | None = 50, float64: bool = False,
            progress: Callable[[Iterator, int], Iterator] | None = None) -> dict[str, int]:
    """Convert `path` into the ADIOS2 file `out`; returns graphs per label."""
    mod = detect(path, kind)
    if mod.NAME != "g2" and not os.path.exists(path):
        raise DataError(f"{path}: no such file or directory")
    n = mod.count(path)
    if n <= 0:
        raise DataError(f"{path}: the input holds no structures")
    labels = assign_labels(n, split, seed)
    names = tuple(lab for lab, f in zip(LABELS, split) if f > 0)
    graphs: Iterator = mod.iterate(path)
    if progress is not None:
        graphs = progress(graphs, n)
    attrs = {"dataset_name": f"{mod.NAME}:{os.path.basename(os.path.normpath(path))}"}
    schema: list[str] | None = None
    dropped: set[str] = set()
    with GraphWriter(out, attrs, labels=names) as w:
        i = -1
        for i, g in enumerate(graphs):
            if i >= n:
                raise DataError(f"{path}: holds more structures than the {n} it declares")
            g = finish_graph(g, radius, max_neighbours, float64)
            schema = list(g) if schema is None else schema
            g = _conform(g, schema, dropped, f"{path}: structure {i}")
            try:
                w.add(LABELS[labels[i]], g)
            except DataError as exc:
                raise DataError(f"{path}: structure {i}: {exc}") from None
        if i + 1 != n:
            raise DataError(f"{path}: yielded {i + 1} structures but declares {n}")
    if dropped:
        print(f"mdloader: warning: {path}: fields {', '.join(sorted(dropped))} are missing from "
              "the first structure and were dropped everywhere", file=sys.stderr, flush=True)
    return dict(w.counts)


def _conform(g: dict, schema: list[str], dropped: set[str], where: str) -> dict:
    """The first structure's keys define the file's keys: extras are dropped, a gap is an error."""
    missing = [k for k in schema if k not in g]
    if missing:
        raise DataError(f"{where} lacks {', '.join(missing)}, which the first structure has; "
                        "every structure must carry the same fields")
    dropped.update(k for k in g if k not in schema)
    return {k: g[k] for k in schema}
