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
from typing import Callable, Iterator, Sequence

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


def convert(path, out: str, *, kind: str | None = None,
            split: tuple[float, float, float] = (1.0, 0.0, 0.0), seed: int = 0,
            radius: float = 6.0, max_neighbours: int | None = 50, float64: bool = False,
            progress: Callable[[Iterator, int], Iterator] | None = None,
            x: Sequence[str] = (), y: Sequence[str] = ()) -> dict[str, int]:
    """Convert `path` into the ADIOS2 file `out`; returns graphs per label.

    `path`: one input, split by `split` and `seed`; or a mapping ``{label: input}`` (labelled
    splits, e.g. OC20's ``train/`` and ``val/`` folders into one file's ``trainset`` and
    ``valset``), each input's structures all going to its label in source order.
    `x`, `y`: HydraGNN's columns (:func:`hydragnn_columns`): ``x`` the listed per-atom fields
    side by side, ``y`` the listed per-structure fields; every other field is kept as well."""
    inputs = _inputs(path, kind, split)
    counts = {lab: mod.count(src) for lab, src, mod in inputs}
    for (lab, src, _), n in zip(inputs, counts.values()):
        if n <= 0:
            raise DataError(f"{src}: the input holds no structures")
    if len(inputs) == 1 and inputs[0][0] is None:
        src, mod = inputs[0][1], inputs[0][2]
        labels = assign_labels(counts[None], split, seed)
        names = tuple(lab for lab, f in zip(LABELS, split) if f > 0)
        streams = [(src, mod, counts[None], lambda i, _l=labels: LABELS[_l[i]])]
        name = f"{mod.NAME}:{os.path.basename(os.path.normpath(src))}"
    else:
        names = tuple(lab for lab, _, _ in inputs)
        streams = [(src, mod, counts[lab], lambda i, _lab=lab: _lab) for lab, src, mod in inputs]
        name = ",".join(f"{lab}={mod.NAME}:{os.path.basename(os.path.normpath(src))}"
                        for lab, src, mod in inputs)
    attrs = {"dataset_name": name}
    vdims = {"edge_index": 1, "x": 0, "y": 0}  # HydraGNN's layout, also when sizes never vary
    schema: list[str] | None = None
    dropped: set[str] = set()
    with GraphWriter(out, attrs, vdims=vdims, labels=names) as w:
        for src, mod, n, label_of in streams:
            graphs: Iterator = mod.iterate(src)
            if progress is not None:
                graphs = progress(graphs, n)
            i = -1
            for i, g in enumerate(graphs):
                if i >= n:
                    raise DataError(f"{src}: holds more structures than the {n} it declares")
                g = finish_graph(g, radius, max_neighbours, float64)
                if x or y:
                    g = hydragnn_columns(g, x, y, f"{src}: structure {i}", float64)
                schema = list(g) if schema is None else schema
                g = _conform(g, schema, dropped, f"{src}: structure {i}")
                try:
                    w.add(label_of(i), g)
                except DataError as exc:
                    raise DataError(f"{src}: structure {i}: {exc}") from None
            if i + 1 != n:
                raise DataError(f"{src}: yielded {i + 1} structures but declares {n}")
    if dropped:
        where = path if not isinstance(path, dict) else ", ".join(map(str, path.values()))
        print(f"mdloader: warning: {where}: fields {', '.join(sorted(dropped))} are missing from "
              "the first structure and were dropped everywhere", file=sys.stderr, flush=True)
    return dict(w.counts)


#: names a labelled input may carry (``train=DIR``), and the file's label for each
LABEL_NAMES = {"train": "trainset", "trainset": "trainset", "val": "valset",
               "valset": "valset", "test": "testset", "testset": "testset"}


def _inputs(path, kind, split) -> list[tuple[str | None, str, object]]:
    """``[(label or None, input, source module)]``, each input checked to exist."""
    items = list(path.items()) if isinstance(path, dict) else [(None, path)]
    out = []
    for lab, src in items:
        if lab is not None and lab not in LABELS:
            raise ConfigError(f"{lab}={src}: unknown split {lab!r}; use train=, val= or test= "
                              f"({', '.join(LABELS)})")
        mod = detect(src, kind)
        if mod.NAME != "g2" and not os.path.exists(src):
            raise DataError(f"{src}: no such file or directory")
        out.append((lab, src, mod))
    if len(out) > 1 or out[0][0] is not None:
        if tuple(split) != (1.0, 0.0, 0.0):
            raise ConfigError("--split divides one input; with labelled inputs (train=... "
                              "val=...) each input is its own split: drop --split")
    return out


def hydragnn_columns(g: dict, x: Sequence[str], y: Sequence[str], where: str,
                     float64: bool = False) -> dict:
    """`g` plus HydraGNN's ``x`` (the fields named in `x`, per atom, side by side as
    ``[natoms, F]`` columns; a node-level target such as ``forces`` is columns of ``x`` too, as
    in HydraGNN's layout) and ``y`` (the per-structure fields named in `y`, joined into one
    ``[G]`` vector). A field the structure lacks, or of the wrong kind, is a :class:`DataError`
    naming it and the fields there are."""
    dtype = np.float64 if float64 else np.float32
    natoms = int(np.asarray(g["natoms"]).reshape(-1)[0]) if "natoms" in g else None
    cols, targets = [], []
    for flag, keys in (("--x", x), ("--y", y)):
        for key in keys:
            if key not in g:
                raise DataError(f"{where} has no field {key!r} (asked by {flag}); it has "
                                f"{', '.join(sorted(g))}: pick {flag} among those")
            a = np.asarray(g[key])
            if flag == "--x":
                if natoms is None or a.ndim == 0 or a.shape[0] != natoms:
                    raise DataError(f"{where}: {flag} {key!r} has shape {list(a.shape)}, not one "
                                    f"row an atom ({natoms} atoms); per-structure values go "
                                    "to --y")
                cols.append(a.reshape(natoms, -1).astype(dtype))
            else:
                if natoms is not None and a.ndim and a.shape[0] == natoms and natoms > 1:
                    raise DataError(f"{where}: {flag} {key!r} is per atom (shape "
                                    f"{list(a.shape)}); node-level targets are columns of x in "
                                    f"HydraGNN's layout: put {key!r} in --x")
                targets.append(a.reshape(-1).astype(dtype))
    out = dict(g)
    if cols:
        out["x"] = np.concatenate(cols, axis=1)
    if targets:
        out["y"] = np.concatenate(targets)
    return out


def column_layout(g: dict, x: Sequence[str], y: Sequence[str]) -> dict:
    """HydraGNN config entries for the columns of `x` and `y` in sample `g`: ``node_features``
    and ``graph_features`` as ``{name, dim, column_index}`` (what ``Dataset`` takes)."""
    def entry(keys, per_atom):
        names, dims, idx, at = [], [], [], 0
        for key in keys:
            a = np.asarray(g[key])
            d = int(np.prod(a.shape[1:])) if per_atom else int(a.size)
            names.append(key), dims.append(d), idx.append(at)
            at += d
        return {"name": names, "dim": dims, "column_index": idx}

    return {"node_features": entry(x, True), "graph_features": entry(y, False)}


def _conform(g: dict, schema: list[str], dropped: set[str], where: str) -> dict:
    """The first structure's keys define the file's keys: extras are dropped, a gap is an error."""
    missing = [k for k in schema if k not in g]
    if missing:
        raise DataError(f"{where} lacks {', '.join(missing)}, which the first structure has; "
                        "every structure must carry the same fields")
    dropped.update(k for k in g if k not in schema)
    return {k: g[k] for k in schema}
