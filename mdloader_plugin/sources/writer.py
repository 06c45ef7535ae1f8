"""Streaming writer of HydraGNN's ADIOS2 layout with memory bounded by a chunk size.

The layout needs every global array's shape before its first block is written, and the graph
count of every label before its ``variable_count``/``variable_offset`` arrays. A generator or a
converter learns those only at the end. So :class:`GraphWriter` works in two phases:

1. ``add(label, graph)`` appends each array's raw bytes to a spool file per (label, key) in a
   temporary folder beside the output (same file system), and remembers each graph's shape;
2. ``close()`` opens one ADIOS2 step, defines every global array with its final shape and writes
   it in blocks of about ``chunk_bytes`` read back from the spool, calling BP5's
   ``PerformDataWrite`` after each block so the engine does not buffer the whole step.

Trade-off: the data crosses the disk twice (spool, then .bp) and the spool needs as much free
space as the output; in exchange peak memory is one block plus ADIOS2's buffer pool (measured
~370 MB RSS whether 200 MB or 800 MB were written, versus RSS growing with the data without
``PerformDataWrite``), and any number of graphs can be written. Several ``write`` calls per
variable with different start offsets in one step were checked to read back as one global array.

Conventions HydraGNN's ``AdiosWriter.save`` follows and this writer keeps: one step; per label
``<label>/ndata`` (int64) and ``<label>/keys`` (string list); per key the global array
``<label>/<key>`` concatenated along its one varying dimension (the first dimension whose size
differs between graphs, 0 if none, unless forced by ``vdims``), int64 ``variable_count`` and
global ``variable_offset`` of length ndata, int64 attribute ``variable_dim``; ``total_ndata``.
Zero-d values are stored as shape ``[1]``; bool arrays as uint8 (ADIOS2 has no bool type).
A label with no graphs gets only ``<label>/ndata = 0``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from array import array
from typing import Callable, Mapping

import numpy as np

from ..core import durable
from ..core.errors import DataError

DEFAULT_CHUNK_BYTES = 64 << 20


def variable_dim(arrays: list[np.ndarray]) -> int:
    """The dimension along which per-graph arrays differ (HydraGNN's rule; 0 if none)."""
    shapes = np.array([a.shape for a in arrays])
    return _vdim_of(shapes.min(axis=0), shapes.max(axis=0))


def _vdim_of(lo: np.ndarray, hi: np.ndarray) -> int:
    diff = np.nonzero(np.asarray(lo) != np.asarray(hi))[0]
    return int(diff[0]) if len(diff) else 0


def as_stored(value) -> np.ndarray:
    """A graph value as the layout stores it: at least 1-d, C-contiguous, bool as uint8."""
    arr = np.atleast_1d(np.asarray(value))
    if arr.dtype == np.bool_:
        arr = arr.astype(np.uint8)
    if arr.dtype.kind not in "iufc":
        raise TypeError(f"dtype {arr.dtype} cannot be stored in ADIOS2 (numbers only)")
    return np.ascontiguousarray(arr)


PART_MEMORY = 64 << 20  # bytes a part keeps in memory (beyond: a key spills to its own file)


class _KeySpool:
    """Raw bytes of one key's per-graph arrays, plus each graph's shape. With `held` (a
    one-element list: bytes the writer's spools hold in memory) the arrays are kept in memory
    until that passes :data:`PART_MEMORY`, then this key goes on in its own file."""

    def __init__(self, folder: str, name: str, first: np.ndarray, held: list | None = None):
        self.path = os.path.join(folder, name.replace("/", "__") + ".raw")
        self.held, self.mem = held, []
        self.file = None if held is not None else self._open()
        self.dtype, self.ndim = first.dtype, first.ndim
        self.shapes = array("q")
        self.lo = np.array(first.shape, dtype=np.int64)
        self.hi = self.lo.copy()

    def add(self, arr: np.ndarray, where: str) -> None:
        if arr.dtype != self.dtype or arr.ndim != self.ndim:
            raise DataError(f"{where}: dtype/rank {arr.dtype}{list(arr.shape)} differs from the "
                            f"first graph's {self.dtype} with {self.ndim} dimensions; every "
                            "graph must store a key with the same dtype and rank")
        self.shapes.extend(arr.shape)
        np.minimum(self.lo, arr.shape, out=self.lo)
        np.maximum(self.hi, arr.shape, out=self.hi)
        if not arr.size:
            return
        if self.file is not None:
            self.file.write(memoryview(arr.reshape(-1)).cast("B"))
            return
        self.mem.append(arr.reshape(-1).copy())  # the source may reuse its buffers
        self.held[0] += arr.nbytes
        if self.held[0] > PART_MEMORY:  # spill this key
            self.file = self._open()
            for a in self.mem:
                self.file.write(memoryview(a).cast("B"))
                self.held[0] -= a.nbytes
            self.mem = []

    def _open(self):
        return open(self.path, "wb", buffering=1 << 16)  # 1 MiB x keys a part cost page faults

    def finish(self) -> np.ndarray:
        """Close the spool's file; return the shapes ``[n, ndim]``."""
        if self.file is not None:
            self.file.close()
        return np.frombuffer(self.shapes, dtype=np.int64).reshape(-1, self.ndim)

    def read(self, lo: int, hi: int, out: np.ndarray | None = None) -> np.ndarray:
        """Elements ``lo..hi-1`` of the concatenated raw data (into `out` when given, else a
        fresh, writable array)."""
        if out is None:
            return np.fromfile(self.path, dtype=self.dtype, count=hi - lo,
                               offset=lo * self.dtype.itemsize)
        with open(self.path, "rb") as f:
            f.seek(lo * self.dtype.itemsize)
            read_into(f, out, self.path)
        return out


def read_into(f, out: np.ndarray, path: str) -> None:
    """Fill `out` (C-contiguous) from the open file `f` at its position."""
    view = memoryview(out.reshape(-1)).cast("B")
    if f.readinto(view) != view.nbytes:
        raise DataError(f"{path}: shorter than expected (a spool or part file was truncated; "
                        "remove it and run again)")


class Scratch:
    """Buffers reused from block to block: a fresh array of 64 MB costs its page faults every
    time (about 0.5 s a GB on the development machine), more than copying into it."""

    def __init__(self):
        self._bufs: dict[int, np.ndarray] = {}

    def take(self, slot: int, dtype, shape) -> np.ndarray:
        """A C-contiguous array of `shape` and `dtype` in buffer `slot` (its old contents
        are overwritten by the next ``take`` of that slot)."""
        dtype = np.dtype(dtype)
        n = int(np.prod(shape)) * dtype.itemsize
        buf = self._bufs.get(slot)
        if buf is None or buf.nbytes < n:
            buf = self._bufs[slot] = np.empty(max(n, 1), dtype=np.uint8)
        return buf[:n].view(dtype).reshape(shape)


def put_block(out, name: str, block: np.ndarray, shape, start, count) -> None:
    """One block of the global array `name`, handed to ADIOS2 without its copy (a deferred
    Put, written out by ``PerformDataWrite`` before this returns, so `block` may be reused)."""
    from adios2 import bindings

    var = out.io.inquire_variable(name)
    if var is None:
        var = out.io.define_variable(name, block, shape, start, count)
    else:
        var.set_shape(shape)
        var.set_selection([start, count])
    out.engine.put(var, np.ascontiguousarray(block), bindings.Mode.Deferred)
    out.engine.perform_data_write()


class GraphWriter:
    """Write labelled graphs (dicts of arrays) one at a time; the file appears at ``close()``.

    Args:
        path: output ``.bp`` path.
        attributes: global attributes (``dataset_name``, ``pna_deg``, ``minmax_*``, ...).
        vdims: force a key's variable dimension (else HydraGNN's rule).
        chunk_bytes: size of the blocks written to ADIOS2 (memory bound of the write phase).
        labels: labels written even if no graph is added (as ``ndata = 0``), in this order;
            other labels follow in the order first seen.
        in_memory: keep up to :data:`PART_MEMORY` bytes in memory rather than in a file a
            key (for :meth:`save_part`: a part is then one data file, not one a key).
    """

    def __init__(self, path: str | os.PathLike, attributes: Mapping[str, object] | None = None,
                 vdims: Mapping[str, int] | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 labels: tuple[str, ...] = (), in_memory: bool = False):
        self.path = os.fspath(path)
        self._held = [0] if in_memory else None
        self.attributes = dict(attributes or {})
        self.vdims = dict(vdims or {})
        self.chunk_bytes = max(int(chunk_bytes), 1)
        self.counts: dict[str, int] = {lab: 0 for lab in labels}
        self.keys: dict[str, list[str]] = {}
        self._spools: dict[tuple[str, str], _KeySpool] = {}
        parent = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(parent, exist_ok=True)
        self._dir = tempfile.mkdtemp(prefix=".mdloader-spool-", dir=parent)

    def __enter__(self) -> "GraphWriter":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.close()
        else:
            self.discard()

    def add(self, label: str, graph: Mapping[str, np.ndarray]) -> None:
        """Append one graph to `label`. Every graph of a label must have the same keys."""
        i = self.counts.get(label, 0)
        if label not in self.keys:
            self.keys[label] = list(graph)
        elif len(graph) != len(self.keys[label]) or any(k not in graph for k in self.keys[label]):
            raise DataError(f"{self.path}: graph {i} of {label} has keys {sorted(graph)} but the "
                            f"first graph has {sorted(self.keys[label])}")
        for key in self.keys[label]:
            try:
                arr = as_stored(graph[key])
            except TypeError as exc:
                raise DataError(f"{self.path}: {label}/{key} of graph {i}: {exc}") from None
            spool = self._spools.get((label, key))
            if spool is None:
                spool = self._spools[(label, key)] = _KeySpool(self._dir, f"{label}/{key}", arr,
                                                               self._held)
            spool.add(arr, f"{self.path}: {label}/{key} of graph {i}")
        self.counts[label] = i + 1

    def discard(self) -> None:
        """Drop everything added; write nothing."""
        for spool in self._spools.values():
            if spool.file is not None:
                spool.file.close()
        self._spools.clear()
        shutil.rmtree(self._dir, ignore_errors=True)

    def close(self) -> None:
        """Write the file (one ADIOS2 step) and remove the spool."""
        if not os.path.isdir(self._dir):
            return
        try:
            write_step(self.path, self.counts, self.keys, self._spools, self.attributes,
                       self.vdims, self.chunk_bytes)
        finally:
            self.discard()

    def save_part(self, folder: str, meta: Mapping[str, object] | None = None) -> None:
        """Keep the spool as a part in `folder`: ``data.raw`` (the keys held in memory, then
        every key's shapes as int64), a ``.raw`` file for each key that spilled, and
        ``part.json``; written under a temporary name, flushed to disk (``fsync``) and renamed
        at the end, so a part that exists is complete, also after a crash.
        :class:`.assemble.PartAssembler` joins parts into one file. Nothing is written to
        ``self.path``."""
        import json

        info = {"counts": self.counts, "keys": self.keys, "spools": {}, **dict(meta or {})}
        at = 0
        shapes_all = []
        with open(os.path.join(self._dir, "data.raw"), "wb") as data:
            for (label, key), spool in self._spools.items():
                shapes = spool.finish()
                shapes_all.append(shapes.reshape(-1))
                one = {"file": os.path.basename(spool.path), "offset": 0, "bytes": 0}
                if spool.file is None:  # held in memory: into data.raw
                    one = {"file": "data.raw", "offset": data.tell(),
                           "bytes": sum(a.nbytes for a in spool.mem)}
                    for arr in spool.mem:
                        data.write(memoryview(arr).cast("B"))
                    spool.mem = []
                else:
                    one["bytes"] = os.path.getsize(spool.path)
                info["spools"][f"{label}/{key}"] = {
                    **one, "dtype": spool.dtype.str, "ndim": spool.ndim,
                    "lo": spool.lo.tolist(), "hi": spool.hi.tolist(),
                    "shapes": [at, int(shapes.size)]}
                at += int(shapes.size)
            info["shapes_file"], info["shapes_offset"] = "data.raw", data.tell()
            for shapes in shapes_all:  # every key's shapes at the end (one file a part)
                data.write(shapes.tobytes())
        with open(os.path.join(self._dir, "part.json"), "w") as f:
            f.write(json.dumps(info))  # json.dump encodes in Python, dumps in C
        self._spools.clear()
        shutil.rmtree(folder, ignore_errors=True)
        durable.replace(self._dir, folder)  # on disk before its name says it is done


def write_step(path: str, counts: Mapping[str, int], keys: Mapping[str, list[str]],
               spools: Mapping[tuple[str, str], object], attributes: Mapping[str, object],
               vdims: Mapping[str, int], chunk_bytes: int) -> None:
    """One ADIOS2 step of HydraGNN's layout at `path` from spooled keys (a :class:`_KeySpool`
    for every ``(label, key)``), in blocks of ``chunk_bytes``."""
    import adios2

    with adios2.Stream(path, "w") as out:
        for label, n in counts.items():
            out.write_attribute(f"{label}/ndata", np.int64(n))
            if n:
                out.write_attribute(f"{label}/keys", list(keys[label]))
                for key in keys[label]:
                    _write_key(out, path, label, key, spools[(label, key)], vdims,
                               chunk_bytes)
        out.write_attribute("total_ndata", np.int64(sum(counts.values())))
        for name, val in attributes.items():
            out.write_attribute(name, val if isinstance(val, (str, list)) else np.asarray(val))


def _write_key(out, path: str, label: str, key: str, spool, vdims: Mapping[str, int],
               chunk_bytes: int) -> None:
    shapes = spool.finish()
    name = f"{label}/{key}"
    vdim = vdims.get(key, _vdim_of(spool.lo, spool.hi))
    if not 0 <= vdim < spool.ndim or np.any(np.delete(spool.lo, vdim)
                                             != np.delete(spool.hi, vdim)):
        raise DataError(f"{path}: {name} varies in more than one dimension (shapes from "
                        f"{spool.lo.tolist()} to {spool.hi.tolist()}); HydraGNN's layout "
                        "allows one varying dimension")
    cnt = shapes[:, vdim].copy()
    off = np.zeros_like(cnt)
    np.cumsum(cnt[:-1], out=off[1:])
    gshape = spool.lo.copy()
    gshape[vdim] = int(cnt.sum())
    for start, block in _blocks(shapes, spool.read, vdim, chunk_bytes // spool.dtype.itemsize,
                                Scratch(), spool.dtype):
        box = [0] * len(gshape)
        box[vdim] = start
        put_block(out, name, block, gshape.tolist(), box, list(block.shape))
    if gshape[vdim] == 0:  # every graph is empty along vdim: define the empty variable
        out.write(name, np.zeros(gshape, dtype=spool.dtype), gshape.tolist(),
                  [0] * len(gshape), gshape.tolist())
    out.write(f"{name}/variable_count", cnt, [len(cnt)], [0], [len(cnt)])
    out.write(f"{name}/variable_offset", off, [len(off)], [0], [len(off)])
    out.write_attribute(f"{name}/variable_dim", np.int64(vdim))


def _blocks(shapes: np.ndarray, read: Callable[..., np.ndarray], vdim: int,
            max_elems: int, scratch: Scratch | None = None, dtype=None):
    """Yield ``(start along vdim, block array)`` of consecutive graphs of about `max_elems`
    elements; `read(lo, hi)` returns elements ``lo..hi-1`` of the spooled data (``read(lo,
    hi, out)`` fills `out` when `scratch` gives the buffers; a block is then valid only until
    the next one is taken)."""
    sizes = shapes.prod(axis=1)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    along = np.concatenate([[0], np.cumsum(shapes[:, vdim])])
    g = 0
    while g < len(shapes):
        h = max(int(np.searchsorted(ends, starts[g] + max_elems, side="right")), g + 1)
        if ends[h - 1] > starts[g]:
            lo, hi = int(starts[g]), int(ends[h - 1])
            flat = (read(lo, hi) if scratch is None
                    else read(lo, hi, scratch.take(0, dtype, hi - lo)))
            if vdim == 0:
                block = flat.reshape([-1] + shapes[g, 1:].tolist())
            else:
                block = _join_along(flat, shapes[g:h], vdim, scratch)
            yield int(along[g]), block
        g = h


def _join_along(flat: np.ndarray, shapes: np.ndarray, vdim: int,
                scratch: Scratch | None = None) -> np.ndarray:
    """Graphs of `shapes`, stored one after another in `flat`, joined along `vdim` (> 0): a
    slice copy a graph when graphs are large (``edge_index`` ``[2, E]`` of thousands of edges),
    else one ragged gather for each index of the dimensions before `vdim`."""
    pre = int(np.prod(shapes[0, :vdim]))
    post = int(np.prod(shapes[0, vdim + 1:]))
    runs = shapes[:, vdim] * post  # elements of one row of one graph
    src = np.concatenate([[0], np.cumsum(runs * pre)[:-1]])  # each graph's start in flat
    dst = np.concatenate([[0], np.cumsum(runs)[:-1]])
    total = int(runs.sum())
    out = (np.empty((pre, total), dtype=flat.dtype) if scratch is None
           else scratch.take(1, flat.dtype, (pre, total)))
    if total >= 256 * len(runs):  # long runs: slices copy faster than an index gathers
        for s, d, r in zip(src.tolist(), dst.tolist(), runs.tolist()):
            out[:, d:d + r] = flat[s:s + pre * r].reshape(pre, r)
    else:
        step = np.arange(total, dtype=np.int64)
        for p in range(pre):
            out[p] = flat[np.repeat(src + p * runs - dst, runs) + step]
    gshape = shapes[0].copy()
    gshape[vdim] = int(shapes[:, vdim].sum())
    return out.reshape(gshape.tolist())


def write_graphs(path: str | os.PathLike, datasets: Mapping[str, list[Mapping[str, np.ndarray]]],
                 attributes: Mapping[str, object] | None = None,
                 vdims: Mapping[str, int] | None = None) -> None:
    """Write labelled lists of graphs (dicts of arrays) in HydraGNN's layout, in one step.

    `vdims` forces a key's variable dimension (otherwise HydraGNN's rule: the first dimension
    whose size differs between graphs, else 0). Every graph of a label must have the same keys.
    """
    with GraphWriter(path, attributes, vdims, labels=tuple(datasets)) as w:
        for label, graphs in datasets.items():
            for g in graphs:
                w.add(label, g)
