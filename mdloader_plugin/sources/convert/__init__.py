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
import shutil
import sys
from typing import Callable, Iterator, Sequence

import numpy as np

from ...core import durable
from ...core.errors import ConfigError, DataError
from ..graph import nearest, radius_graph
from ..assemble import PartAssembler
from ..synth import split_counts
from ..writer import GraphWriter
from .lock import OutputLock

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


#: what ``--neighbour-overflow`` takes: keep each atom's nearest K (counted), or refuse
OVERFLOW = ("truncate", "error")


def finish_graph(g: dict, radius: float, max_neighbours: int | None, float64: bool = False,
                 overflow: str = "truncate") -> tuple[dict[str, np.ndarray], int]:
    """Stored dtypes, ``natoms``, and a radius graph when edges are absent; with the number of
    neighbours beyond `max_neighbours` the graph left out (`overflow` ``error``: a
    :class:`DataError` instead)."""
    out, dropped = {}, 0
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
            ei, offs, d = radius_graph(pos, radius, cell, pbc)
        except ValueError as exc:
            raise DataError(f"cannot build the radius graph: {exc}") from None
        if max_neighbours is not None:
            cut = nearest(ei, offs, d, max_neighbours)
            if cut.dropped and overflow == "error":
                raise DataError(f"atom {cut.centre} has {cut.most} neighbours within {radius} A, "
                                f"above --max-neighbours {max_neighbours}: raise "
                                "--max-neighbours (0: no limit), or pass --neighbour-overflow "
                                "truncate to keep each atom's nearest")
            (ei, offs, d), dropped = cut.graph, cut.dropped
        out["edge_index"] = ei
        if cell is not None:
            out["cell_offsets"] = offs.astype(np.float64 if float64 else np.float32)
    return out, dropped


def convert(path, out: str, *, kind: str | None = None,
            split: tuple[float, float, float] = (1.0, 0.0, 0.0), seed: int = 0,
            radius: float = 6.0, max_neighbours: int | None = 50, float64: bool = False,
            neighbour_overflow: str = "truncate",
            progress: Callable[[int, int], Callable[[int], None]] | None = None,
            x: Sequence[str] = (), y: Sequence[str] = (), comm=None, overwrite: bool = False,
            part_size: int | None = None, jobs: int = 1, writers: int = 1) -> dict[str, int]:
    """Convert `path` into the ADIOS2 file `out`; returns graphs per label.

    `path`: one input, split by `split` and `seed`; or a mapping ``{label: input}`` (labelled
    splits, e.g. OC20's ``train/`` and ``val/`` folders into one file's ``trainset`` and
    ``valset``), each input's structures all going to its label in source order.
    `x`, `y`: HydraGNN's columns (:func:`hydragnn_columns`): ``x`` the listed per-atom fields
    side by side, ``y`` the listed per-structure fields; every other field is kept as well.
    `comm`: an MPI communicator whose ranks share the work (every rank calls this; default: this
    process alone); the file is the same whatever the number of ranks (see :mod:`.parallel`).
    `jobs`: processes on this machine without MPI (``jobs - 1`` forked workers beside this one;
    the same file). `progress(total, done)`: called once on rank 0, returns a function given
    the structures of each part finished. `part_size`: structures a part (default: about 16
    parts a rank or job). `writers`: ranks writing side by side (:mod:`.writers`); above 1 the
    output is a folder of that many files that MDLoader reads as one data set (:mod:`..joined`).
    """
    from . import parallel as par
    from . import writers as wr

    comm = comm if comm is not None else par.Serial()

    def options_and_inputs():  # every rank's error, said once (one agreement for both)
        if jobs > 1 and comm.size > 1:
            raise ConfigError("--jobs is for one process without MPI; under mpiexec the ranks "
                              "share the work")
        wr.check(writers, comm.size, jobs)
        return _inputs(path, kind, split)

    inputs = par._guard(comm, options_and_inputs)
    if os.path.exists(out) and not overwrite:
        par.agree(comm, DataError(f"{out} exists: pass --overwrite to replace it, or choose "
                                  "another --out"))
    streams = [(src, mod) for _, src, mod in inputs]
    shard_counts = par.count_shards(comm, streams)
    totals = [int(c.sum()) for c in shard_counts]
    if inputs[0][0] is None:
        src, mod = streams[0]
        names = tuple(lab for lab, f in zip(LABELS, split) if f > 0)
        name = f"{mod.NAME}:{os.path.basename(os.path.normpath(src))}"
    else:
        names = tuple(lab for lab, _, _ in inputs)
        name = ",".join(f"{lab}={mod.NAME}:{os.path.basename(os.path.normpath(src))}"
                        for lab, src, mod in inputs)
    total = sum(totals)
    size = part_size or min(max(-(-total // (max(comm.size, jobs) * par.PARTS_A_RANK)), 1),
                            par.PART_SIZE_MAX)
    options = {"kind": kind, "split": list(split), "seed": seed, "radius": radius,
               "max_neighbours": max_neighbours, "neighbour_overflow": neighbour_overflow,
               "float64": float64, "x": list(x),
               "y": list(y), "labels": [lab for lab, _, _ in inputs], "counts": totals}
    work = os.path.normpath(out) + ".parts"
    plan = {"fingerprint": par.fingerprint(streams, options), "parts": None}
    lock = OutputLock(work, out)  # rank 0 takes it in prepare (:mod:`.lock`)
    try:
        todo = par.prepare(comm, work, plan,
                           lambda: par.make_parts(streams, shard_counts, size), overwrite,
                           lock)
        parts = plan["parts"]
        labels_path = os.path.join(work, "labels.npy")
        if inputs[0][0] is None and comm.rank == 0 and not os.path.exists(labels_path):
            np.save(labels_path + ".tmp.npy", assign_labels(totals[0], split, seed))
            durable.replace(labels_path + ".tmp.npy", labels_path)
        comm.Barrier()
        lab_ids = np.load(labels_path, mmap_mode="r") if inputs[0][0] is None else None
        label_of = [(lambda i: LABELS[lab_ids[i]]) if lab is None else (lambda i, _l=lab: _l)
                    for lab, _, _ in inputs]

        def graphs(p, where_first=None):
            src, mod = streams[p["stream"]]
            it = iter(par.structures(mod, p))
            for j in range(p["start"], p["stop"] + 1):
                where = f"{p['shard']}: structure {j}"
                try:
                    g = next(it)
                except StopIteration:
                    if j < p["stop"]:
                        raise DataError(f"{p['shard']}: yielded {j} structures but declares "
                                        f"{p['stop']}") from None
                    return
                except (DataError, ConfigError):
                    raise
                except Exception as exc:  # noqa: BLE001 - a truncated or foreign file
                    raise DataError(f"{where}: cannot read it as {mod.NAME} ({type(exc).__name__}: "
                                    f"{exc}); is the file complete and of that format?") from None
                if j == p["stop"]:
                    raise DataError(f"{p['shard']}: holds more structures than the {p['stop']} it "
                                    "declares")
                try:
                    g, cut = finish_graph(g, radius, max_neighbours, float64, neighbour_overflow)
                except DataError as exc:
                    raise DataError(f"{where}: {exc}") from None
                if x or y:
                    g = hydragnn_columns(g, x, y, where, float64)
                yield where, label_of[p["stream"]](p["first"] + j - p["start"]), g, cut

        def first_schema():
            return list(next(graphs(dict(parts[0], stop=parts[0]["start"] + 1)))[2])

        schema = comm.bcast(par._guard(comm, first_schema) if comm.rank == 0
                            else par._guard(comm, lambda: None), root=0)

        def convert_part(p, folder):
            dropped: set[str] = set()
            cut = [0, 0]  # neighbours --max-neighbours left out, and the structures they were in
            w = GraphWriter(folder + ".out", labels=names, in_memory=True)
            try:
                for where, label, g, n in graphs(p):
                    cut[0], cut[1] = cut[0] + n, cut[1] + bool(n)
                    g = _conform(g, schema, dropped, where)
                    try:
                        w.add(label, g)
                    except DataError as exc:
                        raise DataError(f"{where}: {str(exc).split(': ', 1)[-1]}") from None
                what = f"{p['shard']} structures {p['start']}-{p['stop'] - 1}"
                w.save_part(folder, {"dropped": sorted(dropped), "cut": cut, "what": what})
            finally:
                w.discard()

        update, asm = None, None
        runs = wr.groups(parts, writers)
        me = wr.mine(comm.rank, comm.size, runs)
        if comm.rank == 0 and progress is not None:
            left = sum(parts[i]["stop"] - parts[i]["start"] for i in todo)
            update = progress(total, total - left)
        vdims = {"edge_index": 1, "x": 0, "y": 0}  # HydraGNN's layout, also when never varying
        if me is not None:
            tmp = os.path.join(work, "out.bp") if len(runs) == 1 else wr.sub_file(work, me)
            shutil.rmtree(tmp, ignore_errors=True)
            asm = PartAssembler(tmp, {"dataset_name": name}, vdims, names)
        try:
            par.run_parts(comm, work, plan, wr.claim_order(todo, runs), convert_part, update, asm,
                          jobs=jobs, run=runs[me] if me is not None else None, writers=len(runs),
                          lock=lock)
        except BaseException:
            if asm is not None:
                asm.discard()
            raise
        if len(runs) == 1:
            counts, notes = par.finish(comm, work, out, asm, len(parts), overwrite, lock)
        else:
            counts, notes = wr.finish(comm, work, out, asm, runs[me] if me is not None else None,
                                      len(runs), vdims, overwrite, par.part_dir, par._guard)
            par.clean(comm, work, len(parts), lock)
        if comm.rank == 0:
            _warn(path, notes, radius, max_neighbours)
        return counts
    finally:
        lock.release()


def _warn(path, notes: dict, radius: float, max_neighbours: int | None) -> None:
    """Rank 0's warnings about what the conversion left out (``notes`` of the assembler)."""
    where = path if not isinstance(path, dict) else ", ".join(map(str, path.values()))
    if notes["dropped"]:
        print(f"mdloader: warning: {where}: fields {', '.join(notes['dropped'])} are missing "
              "from the first structure and were dropped everywhere", file=sys.stderr, flush=True)
    edges, structures = notes["cut"]
    if edges:
        print(f"mdloader: warning: {where}: {edges} neighbours within {radius} A in {structures} "
              f"structures were beyond --max-neighbours {max_neighbours} and left out (each atom "
              "keeps its nearest); raise --max-neighbours (0: no limit), or pass "
              "--neighbour-overflow error to refuse such structures", file=sys.stderr, flush=True)


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


def column_config(g: dict, x: Sequence[str], y: Sequence[str]) -> dict:
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
