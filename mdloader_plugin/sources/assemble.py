"""One file from parts, written while the parts still arrive: what a parallel conversion's
rank 0 runs (see :mod:`.convert.parallel`).

A part is a folder :meth:`.writer.GraphWriter.save_part` left: each ``(label, key)``'s raw bytes,
every graph's shape, ``part.json``. :class:`PartAssembler` takes parts in order (``add``) and
writes each ``(label, key)``'s global array as soon as 8 MB of it wait (in blocks of up to
``chunk_bytes``, 64 MB), at the offset the graphs before it reached; ADIOS2 lets a global array
grow within its one step (the shape given with a block is the array's shape so far; the last
one stands), so the file needs no count of the graphs ahead. ``close`` writes what waits, the
attributes and ends the step. The arrays read back are those one :class:`.writer.GraphWriter`
given every graph in the same order writes (``variable_count``/``variable_offset``
included), only cut into other blocks.

A key's varying dimension (HydraGNN's rule: the first dimension whose size differs between
graphs, 0 if none, unless forced) is known early when forced, for 1-d keys, and once dimension
0 has differed; a key whose graphs all had one shape so far waits (as a list of its parts, no
data in memory) until it is known or the end. Memory: one block plus a list entry a waiting
part.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from contextlib import closing
from typing import Mapping

import numpy as np

from ..core.errors import DataError
from .writer import DEFAULT_CHUNK_BYTES, Scratch, _blocks, _vdim_of, put_block

GROUP = 256  # parts written together at most (bounds the shapes held at once)
WRITE_AT = 8 << 20  # bytes of a key waiting that are written (blocks of 8-64 MB in the file)
OPEN = 64  # part files kept open


class _Files:
    """Part files open for reading, the last :data:`OPEN` used (opening a file costs about
    0.2 ms on the development machine's file system, as much as reading 200 kB)."""

    def __init__(self):
        self.fds: OrderedDict[str, int] = OrderedDict()

    def read(self, path: str, offset: int, out: np.ndarray) -> None:
        """Fill `out` from `path` at byte `offset`."""
        self.readv(path, offset, [memoryview(out.reshape(-1))])

    def readv(self, path: str, offset: int, views: list) -> None:
        """Fill the buffers `views`, in order, from `path` at byte `offset` (``preadv``: the
        bytes go straight to where each belongs)."""
        fd = self.fds.pop(path, None)
        if fd is None:
            fd = os.open(path, os.O_RDONLY)
            while len(self.fds) >= OPEN:
                os.close(self.fds.popitem(last=False)[1])
        self.fds[path] = fd
        bufs = [v.cast("B") for v in views if v.nbytes]
        i = 0
        while i < len(bufs):
            n = os.preadv(fd, bufs[i:i + 1024], offset)  # IOV_MAX buffers a call
            if n <= 0:
                raise DataError(f"{path}: shorter than its part.json says; remove this "
                                "part's folder and run again")
            offset += n
            while n:
                if n >= bufs[i].nbytes:
                    n -= bufs[i].nbytes
                    i += 1
                else:
                    bufs[i], n = bufs[i][n:], 0

    def close(self) -> None:
        while self.fds:
            os.close(self.fds.popitem()[1])


class _JoinedSpool:
    """One ``(label, key)`` over several parts, read as the concatenation of the parts' spools
    in order (the ``read(lo, hi)`` that :func:`.writer._blocks` takes)."""

    def __init__(self, pieces: list[tuple[str, dict]], files: _Files):
        self.files, self.pieces, shapes = files, [], []
        self.dtype = np.dtype(pieces[0][1]["dtype"])
        for folder, info in pieces:
            sh = _shapes(folder, info, files)
            shapes.append(sh)
            self.pieces.append((os.path.join(folder, info["file"]), int(info.get("offset", 0)),
                                int(sh.prod(axis=1).sum())))
        self.shapes = np.concatenate(shapes)
        self.ends = np.cumsum([n for _, _, n in self.pieces])

    def read(self, lo: int, hi: int, out: np.ndarray | None = None) -> np.ndarray:
        out = np.empty(hi - lo, dtype=self.dtype) if out is None else out
        f = int(np.searchsorted(self.ends, lo, side="right"))
        at = lo
        while at < hi:
            start = int(self.ends[f - 1]) if f else 0
            take = min(hi, int(self.ends[f])) - at
            if take:  # straight into the block: no second copy
                path, offset, _ = self.pieces[f]
                self.files.read(path, offset + (at - start) * self.dtype.itemsize,
                                out[at - lo:at - lo + take])
            at += take
            f += 1
        return out


    def scatter(self, lo: int, views: list) -> None:
        """Elements ``lo..`` into `views` in order (each within one piece: whole graphs)."""
        f = int(np.searchsorted(self.ends, lo, side="right"))
        at, i, size = lo, 0, self.dtype.itemsize
        while i < len(views):
            while at >= self.ends[f]:
                f += 1
            path, offset, _ = self.pieces[f]
            start, stop = (int(self.ends[f - 1]) if f else 0), int(self.ends[f])
            j, n = i, 0
            while j < len(views) and at + n < stop:
                n += views[j].nbytes // size
                j += 1
            self.files.readv(path, offset + (at - start) * size, views[i:j])
            at, i = at + n, j


def _scattered(spool: _JoinedSpool, vdim: int, max_elems: int, scratch: Scratch):
    """:func:`.writer._blocks` for a key whose graphs join along `vdim` > 0 in long runs
    (``edge_index`` ``[2, E]``): each graph's rows read straight to their place in the block
    (``preadv``), not read and then copied."""
    shapes = spool.shapes
    sizes = shapes.prod(axis=1)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    along = np.concatenate([[0], np.cumsum(shapes[:, vdim])])
    pre, post = int(np.prod(shapes[0, :vdim])), int(np.prod(shapes[0, vdim + 1:]))
    g = 0
    while g < len(shapes):
        h = max(int(np.searchsorted(ends, starts[g] + max_elems, side="right")), g + 1)
        runs = (shapes[g:h, vdim] * post).tolist()
        total = sum(runs)
        if total:
            out = scratch.take(1, spool.dtype, (pre, total))
            views, d = [], 0
            for r in runs:  # the file holds a graph's rows one after another
                if r:
                    views.extend(memoryview(out[p, d:d + r]) for p in range(pre))
                d += r
            spool.scatter(int(starts[g]), views)
            gshape = shapes[g].copy()
            gshape[vdim] = total // post
            yield int(along[g]), out.reshape(gshape.tolist())
        g = h


def _shapes(folder: str, info: dict, files: _Files) -> np.ndarray:
    """A part's shapes of one key, ``[n, ndim]`` (at the end of ``data.raw``; older parts
    kept them in ``shapes.i8``, or a ``.shapes.npy`` a key)."""
    if "shapes" not in info:
        return np.load(os.path.join(folder, info["file"][:-4] + ".shapes.npy"))
    at, n = info["shapes"]
    out = np.empty((n // int(info["ndim"]), int(info["ndim"])), dtype=np.int64)
    files.read(os.path.join(folder, info["shapes_file"]), info["shapes_offset"] + 8 * at, out)
    return out


class _Key:
    """One ``(label, key)`` of the file: its parts not yet written, and how far it got."""

    def __init__(self, name: str, info: dict, forced: int | None):
        self.name, self.forced = name, forced
        self.dtype, self.ndim = np.dtype(info["dtype"]), int(info["ndim"])
        self.lo = np.array(info["lo"], dtype=np.int64)
        self.hi = self.lo.copy()
        self.waiting: list[tuple[str, dict]] = []
        self.bytes = 0
        self.graphs = 0  # graphs written
        self.along = 0  # extent written along the varying dimension

    def add(self, folder: str, info: dict, path: str) -> None:
        if np.dtype(info["dtype"]) != self.dtype or int(info["ndim"]) != self.ndim:
            raise DataError(f"{path}: {self.name} in {info.get('what', folder)}: dtype/rank "
                            f"{info['dtype']}/{info['ndim']} differs from the first part's "
                            f"{self.dtype}/{self.ndim}; every graph must store a key with the "
                            "same dtype and rank")
        np.minimum(self.lo, info["lo"], out=self.lo)
        np.maximum(self.hi, info["hi"], out=self.hi)
        self.waiting.append((folder, info))
        self.bytes += int(info.get("bytes", 0))

    def vdim(self, final: bool) -> int | None:
        """The varying dimension, or None while later graphs could still change it."""
        if self.forced is not None:
            return self.forced
        if final or self.ndim == 1 or self.lo[0] != self.hi[0]:
            return _vdim_of(self.lo, self.hi)
        return None

    def write(self, out, path: str, chunk_bytes: int, scratch: Scratch, files: _Files,
              final: bool = False) -> None:
        """Write the waiting parts if about a block waits (all of them when `final`)."""
        vdim = self.vdim(final)
        if vdim is None or not self.waiting or not (
                final or self.bytes >= min(chunk_bytes, WRITE_AT)
                or len(self.waiting) >= GROUP):
            return
        if not 0 <= vdim < self.ndim or np.any(np.delete(self.lo, vdim)
                                                != np.delete(self.hi, vdim)):
            raise DataError(f"{path}: {self.name} varies in more than one dimension (shapes "
                            f"from {self.lo.tolist()} to {self.hi.tolist()}); HydraGNN's "
                            "layout allows one varying dimension")
        for g in range(0, len(self.waiting), GROUP):
            spool = _JoinedSpool(self.waiting[g:g + GROUP], files)
            self._write(out, spool, vdim, chunk_bytes, scratch)
        self.waiting, self.bytes = [], 0

    def _write(self, out, spool: _JoinedSpool, vdim: int, chunk_bytes: int,
               scratch: Scratch) -> None:
        shapes = spool.shapes
        cnt = shapes[:, vdim].copy()
        off = self.along + np.concatenate([[0], np.cumsum(cnt[:-1])]).astype(np.int64)
        gshape = self.lo.copy()
        elems = max(chunk_bytes // self.dtype.itemsize, 1)
        long_runs = vdim > 0 and shapes.prod(axis=1).sum() >= 256 * len(shapes) * int(
            np.prod(shapes[0, :vdim]))
        for start, block in (_scattered(spool, vdim, elems, scratch) if long_runs
                             else _blocks(shapes, spool.read, vdim, elems, scratch, self.dtype)):
            box = [0] * self.ndim
            box[vdim] = self.along + start
            gshape[vdim] = box[vdim] + block.shape[vdim]
            put_block(out, self.name, block, gshape.tolist(), box, list(block.shape))
        n = len(cnt)
        total = [self.graphs + n]
        out.write(f"{self.name}/variable_count", cnt, total, [self.graphs], [n])
        out.write(f"{self.name}/variable_offset", off, total, [self.graphs], [n])
        self.graphs += n
        self.along += int(cnt.sum())

    def close(self, out, path: str, chunk_bytes: int, scratch: Scratch, files: _Files) -> None:
        self.write(out, path, chunk_bytes, scratch, files, final=True)
        vdim = self.vdim(True)
        if self.along == 0:  # every graph is empty along vdim: define the empty variable
            gshape = self.lo.copy()
            gshape[vdim] = 0
            out.write(self.name, np.zeros(gshape, dtype=self.dtype), gshape.tolist(),
                      [0] * self.ndim, gshape.tolist())
        out.write_attribute(f"{self.name}/variable_dim", np.int64(vdim))


class PartAssembler:
    """Write parts, given in order, as one file at `path` (HydraGNN's layout, one step).

    Args:
        path: the output (opened at the first part).
        attributes: global attributes, written at ``close``.
        vdims: a key's varying dimension, forced (else HydraGNN's rule over every graph).
        labels: labels written even without graphs (``ndata = 0``), in this order.
        chunk_bytes: about the size of a block, the memory bound.
    """

    def __init__(self, path: str, attributes: Mapping[str, object] | None = None,
                 vdims: Mapping[str, int] | None = None, labels: tuple[str, ...] = (),
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES):
        self.path = path
        self.attributes = dict(attributes or {})
        self.vdims = dict(vdims or {})
        self.chunk_bytes = max(int(chunk_bytes), 1)
        self.counts: dict[str, int] = {lab: 0 for lab in labels}
        self.keys: dict[str, list[str]] = {}
        self._keys: dict[tuple[str, str], _Key] = {}
        self._out = None
        self._scratch = Scratch()  # the blocks' buffers, reused (no page faults a block)
        self._files = _Files()
        self.parts = 0
        self.dropped: set[str] = set()  # fields the parts' ``part.json`` say were dropped
        self.cut = [0, 0]  # neighbours the parts left out by max_neighbours, and in how many

    def add(self, folder: str) -> dict:
        """Append the part `folder` (after every part added before); its ``part.json``."""
        import adios2

        with open(os.path.join(folder, "part.json")) as f:
            info = json.load(f)
        if self._out is None:
            self._out = adios2.Stream(self.path, "w")
        for label, n in info["counts"].items():
            self.counts[label] = self.counts.get(label, 0) + n
            if not n:
                continue
            keys = self.keys.setdefault(label, info["keys"][label])
            if sorted(info["keys"][label]) != sorted(keys):
                raise DataError(f"{self.path}: {info.get('what', folder)} has keys "
                                f"{sorted(info['keys'][label])} in {label} but the first part "
                                f"has {sorted(keys)}")
            for key in keys:
                one = dict(info["spools"][f"{label}/{key}"], what=info.get("what", folder),
                           shapes_file=info.get("shapes_file", "shapes.i8"),
                           shapes_offset=int(info.get("shapes_offset", 0)))
                k = self._keys.get((label, key))
                if k is None:
                    k = self._keys[(label, key)] = _Key(f"{label}/{key}", one,
                                                        self.vdims.get(key))
                k.add(folder, one, self.path)
                k.write(self._out, self.path, self.chunk_bytes, self._scratch, self._files)
        self.parts += 1
        self.dropped.update(info.get("dropped", []))
        self.cut = [a + b for a, b in zip(self.cut, info.get("cut", (0, 0)))]
        return info

    def notes(self) -> dict:
        """What the parts added so far left out: fields dropped, neighbours cut."""
        return {"dropped": sorted(self.dropped), "cut": list(self.cut)}

    def shapes_seen(self) -> dict[str, list]:
        """Each key's ``[dtype, lowest shape, highest shape]`` over the graphs added: what the
        writers of a joined data set agree on (:func:`agree_shapes`) before ``close``."""
        return {k.name: [k.dtype.str, k.lo.tolist(), k.hi.tolist()] for k in self._keys.values()}

    def close(self, shapes: Mapping[str, list] | None = None) -> dict[str, int]:
        """Write what waits and the attributes; end the file. Graphs per label. `shapes`: the
        shapes every writer saw (:func:`agree_shapes`), so that a key's varying dimension is
        the one a single file of all the graphs would have."""
        import adios2

        for k in self._keys.values():
            if shapes and k.name in shapes:
                np.minimum(k.lo, shapes[k.name][1], out=k.lo)
                np.maximum(k.hi, shapes[k.name][2], out=k.hi)
        out = self._out if self._out is not None else adios2.Stream(self.path, "w")
        self._out = None
        with out, closing(self._files):
            for label, n in self.counts.items():
                out.write_attribute(f"{label}/ndata", np.int64(n))
                if n:
                    out.write_attribute(f"{label}/keys", list(self.keys[label]))
                    for key in self.keys[label]:
                        self._keys[(label, key)].close(out, self.path, self.chunk_bytes,
                                                       self._scratch, self._files)
            out.write_attribute("total_ndata", np.int64(sum(self.counts.values())))
            for name, val in self.attributes.items():
                out.write_attribute(name, val if isinstance(val, (str, list))
                                    else np.asarray(val))
        return dict(self.counts)

    def discard(self) -> None:
        """Stop without finishing the file (the caller removes it)."""
        self._files.close()
        if self._out is not None:
            self._out.close()
            self._out = None


def agree_shapes(seen: list[Mapping[str, list] | None], vdims: Mapping[str, int],
                 where: str) -> dict[str, list]:
    """The writers' :meth:`PartAssembler.shapes_seen` joined (`seen`: one a rank, None where
    a rank writes nothing); the same on every rank. A key of two dtypes or ranks, or varying
    in more than one dimension over all graphs, is the :class:`DataError` one writer gives."""
    out: dict[str, list] = {}
    for one in seen:
        for name, (dtype, lo, hi) in (one or {}).items():
            have = out.get(name)
            if have is None:
                out[name] = [dtype, list(lo), list(hi)]
            elif have[0] != dtype or len(have[1]) != len(lo):
                raise DataError(f"{where}: {name}: dtype/rank {np.dtype(dtype)}/{len(lo)} in one "
                                f"writer's parts, {np.dtype(have[0])}/{len(have[1])} in another's;"
                                " every graph must store a key with the same dtype and rank")
            else:
                have[1] = np.minimum(have[1], lo).tolist()
                have[2] = np.maximum(have[2], hi).tolist()
    for name, (_, lo, hi) in out.items():
        forced = vdims.get(name.split("/", 1)[-1])
        d = forced if forced is not None else _vdim_of(np.array(lo), np.array(hi))
        if np.any(np.delete(lo, d) != np.delete(hi, d)):
            raise DataError(f"{where}: {name} varies in more than one dimension (shapes from "
                            f"{lo} to {hi}); HydraGNN's layout allows one varying dimension")
    return out


def assemble(path: str, parts: list[str], attributes: Mapping[str, object] | None = None,
             vdims: Mapping[str, int] | None = None, labels: tuple[str, ...] = (),
             chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> dict[str, int]:
    """Write the parts (folders of :meth:`.writer.GraphWriter.save_part`) as one file at
    `path`, graphs in part order. Returns graphs per label."""
    asm = PartAssembler(path, attributes, vdims, labels, chunk_bytes)
    try:
        for folder in parts:
            asm.add(folder)
    except BaseException:
        asm.discard()
        raise
    return asm.close()
