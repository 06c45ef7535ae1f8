"""Many records of one schema -> each key joined over all of them, without a decode a record.

The records of a step almost always share one schema: the same names, dtypes and ranks in the
same order, so their headers are byte-identical except for the total length, the payload offsets
and the shapes. A :class:`Gather` learns those positions from the first record (once a schema),
reads every header as one ``[records, header]`` array, checks the invariant bytes and every
bound for all records and keys at once, and copies each key's payloads out with one C-level
join. Cost: ~15 numpy calls a batch plus ~5 a key plus one memoryview slice a record and key,
against a Python decode (~20 us) a record. Anything that does not fit (mixed schemas, shapes that
disagree off the joined axis, bad bounds) returns None and the caller decodes record by record,
which also names what is wrong.

With the compiled kernels (:mod:`.kernels`) the per-record work runs in C with the GIL released:
one ``scan`` checks every header against the first record's and tables each key's payload
offset, element count and extent; one ``join`` a key copies the payloads out. The Python left
is a few calls a key, whatever the batch size; the bytes are the same as the numpy path's.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from . import kernels
from .codec import _DTYPES, _ENTRY, _FIXED, MAGIC, VERSION

AxisOf = Callable[[str, int], int]


@dataclass
class Columns:
    """``arrays[k]`` joins every record's ``k`` along axis ``axis[k]`` (0-d arrays become one
    entry each); ``sizes[k][i]`` is record i's extent along that axis. Fresh memory: nothing
    refers to the buffer the records came from."""

    arrays: dict
    sizes: dict
    axis: dict
    count: int


class _Schema:
    """Where the variable fields of one header layout are, and what the rest must be."""

    def __init__(self, mv, start: int, head: int, axis_of: AxisOf):
        self.head, self.axis_of = head, axis_of
        self.names, self.dtypes, self.ndims, self.axes = [], [], [], []
        off_at, shape_at = [], []
        pos = _FIXED.size
        for _ in range(_FIXED.unpack_from(mv, start)[2]):
            nlen, code, ndim, _, _ = _ENTRY.unpack_from(mv, start + pos)
            if code >= len(_DTYPES):
                raise ValueError(f"unknown dtype code {code} (valid 0..{len(_DTYPES) - 1}) in a "
                                 "record header: the record is corrupt or from a newer MDLoader")
            name_at = start + pos + _ENTRY.size + 8 * ndim
            self.names.append(bytes(mv[name_at:name_at + nlen]).decode())
            self.dtypes.append(_DTYPES[code])
            self.ndims.append(ndim)
            self.axes.append(axis_of(self.names[-1], ndim) if ndim else 0)
            off_at.append(pos + 4)
            shape_at.append(pos + _ENTRY.size)
            pos += _ENTRY.size + 8 * ndim + nlen
        if pos > head:
            raise ValueError("entries run past the header")
        fixed = np.ones(head, dtype=bool)
        fixed[12:16] = False  # total length
        for o, sh, nd in zip(off_at, shape_at, self.ndims):
            fixed[o:o + 4] = False
            fixed[sh:sh + 8 * nd] = False
        self.fixed_at = np.flatnonzero(fixed)
        self.fixed = np.frombuffer(mv, np.uint8, head, start)[self.fixed_at].copy()
        self.fixed_bytes = self.fixed.tobytes()
        self.off_at = (np.asarray(off_at, dtype=np.int64)[:, None] + np.arange(4)).reshape(-1)
        self.shape_at = np.concatenate([np.arange(sh, sh + 8 * nd)
                                        for sh, nd in zip(shape_at, self.ndims)] or [[]]
                                       ).astype(np.int64)
        first = part_starts(self.ndims)
        self.dim0 = first[:-1]  # column of each key's first dimension in the shape table
        self.joined = [int(first[k] + self.axes[k]) for k in range(len(self.names))]
        other = np.ones(int(first[-1]), dtype=bool)
        other[[j for j, nd in zip(self.joined, self.ndims) if nd]] = False
        self.other = np.flatnonzero(other)  # dims that must agree across records
        self.itemsize = np.array([dt.itemsize for dt in self.dtypes], dtype=np.float64)
        self.ranked = [k for k, nd in enumerate(self.ndims) if nd]
        self.axes_arr = np.asarray(self.axes, dtype=np.int64)

    def matches(self, row0: np.ndarray) -> bool:
        return row0.size >= self.head and row0[self.fixed_at].tobytes() == self.fixed_bytes


class Gather:
    """Column-wise gather for one stream of batches (remembers the last schema)."""

    def __init__(self, axis_of: AxisOf = lambda name, ndim: 0):
        self.axis_of = axis_of
        self._schema: _Schema | None = None

    @property
    def schema(self):
        """The record schema of the last batch (a new object whenever the schema changed)."""
        return self._schema

    def __call__(self, buf: np.ndarray, offsets: Sequence[int],
                 nbytes: Sequence[int]) -> Columns | None:
        starts = np.asarray(offsets, dtype=np.int64)
        limits = np.asarray(nbytes, dtype=np.int64)
        if starts.size == 0 or int(limits.min()) < _FIXED.size or \
                int((starts + limits).max()) > buf.size or int(starts.min()) < 0:
            return None
        mv = memoryview(buf).cast("B")
        schema = self._schema_of(mv, buf, int(starts[0]), int(limits.min()))
        if schema is None:
            return None
        k = kernels.get()
        if k is not None and buf.dtype == np.uint8 and buf.ndim == 1 and buf.flags.c_contiguous:
            return _columns_compiled(k, buf, schema, np.ascontiguousarray(starts),
                                     np.ascontiguousarray(limits))
        hdr = buf[starts[:, None] + np.arange(schema.head)]
        if not np.array_equal(hdr[:, schema.fixed_at],
                              np.broadcast_to(schema.fixed, (len(hdr), schema.fixed.size))):
            return None
        return _columns(mv, schema, hdr, starts, limits)

    def same_schema(self, buf: np.ndarray, start: int, room: int) -> bool:
        """Whether the record at `start` (`room` bytes there) has the last batch's schema."""
        s = self._schema
        if s is None or room < s.head or start < 0 or start + s.head > buf.size:
            return False
        return s.matches(buf[start:start + s.head])

    def _schema_of(self, mv, buf, start: int, room: int) -> _Schema | None:
        magic, version, _, _, head, total = _FIXED.unpack_from(mv, start)
        if magic != MAGIC or version != VERSION or not head <= total or head > room:
            return None
        s = self._schema
        if s is not None and s.head == head and s.matches(buf[start:start + head]):
            return s
        try:
            self._schema = _Schema(mv, start, head, self.axis_of)
        except (ValueError, UnicodeDecodeError, IndexError, struct.error):
            return None
        return self._schema


def _columns(mv, schema: _Schema, hdr, starts, limits) -> Columns | None:
    """Check every bound for all records and keys at once, then join key by key."""
    n = len(hdr)
    totals = hdr[:, 12:16].copy().view("<u4").reshape(n).astype(np.int64)
    offs = hdr[:, schema.off_at].copy().view("<u4").reshape(n, len(schema.names))
    offs = offs.astype(np.int64)
    dims = hdr[:, schema.shape_at].copy().view("<i8").reshape(n, schema.shape_at.size // 8)
    if np.any(totals > limits) or np.any(dims < 0) or \
            not np.array_equal(dims[:, schema.other], np.broadcast_to(
                dims[0, schema.other], (n, schema.other.size))):
        return None
    counts = np.ones((n, len(schema.names)), dtype=np.float64)  # float: no silent int64 wrap
    if schema.ranked:
        counts[:, schema.ranked] = np.multiply.reduceat(
            dims.astype(np.float64), schema.dim0[schema.ranked], axis=1)
    if np.any(offs + counts * schema.itemsize > totals[:, None]):
        return None
    counts = counts.astype(np.int64)
    cols = Columns({}, {}, {}, n)
    for k, name in enumerate(schema.names):
        arr, sizes = _join(mv, schema, k, starts + offs[:, k], counts[:, k], dims)
        cols.arrays[name], cols.sizes[name], cols.axis[name] = arr, sizes, schema.axes[k]
    return cols


def _columns_compiled(k, buf: np.ndarray, schema: _Schema, starts, limits) -> Columns | None:
    """:func:`_columns` in two compiled calls and one a key (the GIL released in each)."""
    n, nk = starts.size, len(schema.names)
    tables = np.empty((3, nk, n), dtype=np.int64)  # payload offset, elements, extent
    pay, cnt, ext = tables
    if k.scan(buf, starts, limits, schema.axes_arr, pay, cnt, ext)[0]:
        return None
    s0 = int(starts[0])
    dims0 = buf[s0 + schema.shape_at].view("<i8").tolist() if schema.shape_at.size else []
    joined = ext.sum(axis=1).tolist()
    cols = Columns({}, {}, {}, n)
    first = schema.dim0.tolist()
    for j, name in enumerate(schema.names):
        dt, ndim, axis = schema.dtypes[j], schema.ndims[j], schema.axes[j]
        if ndim == 0:
            shape, lead = (n,), 1
        else:
            shape0 = dims0[first[j]:first[j] + ndim]
            lead = math.prod(shape0[:axis])
            shape = (*shape0[:axis], joined[j], *shape0[axis + 1:])
        out = np.empty(shape, dtype=dt)
        if k.join(buf, pay, cnt, ext, j, nk, max(lead, 1), dt.itemsize, out):
            return None
        cols.arrays[name], cols.sizes[name], cols.axis[name] = out, ext[j], schema.axes[j]
    return cols


def _join(mv, schema: _Schema, k: int, payload, counts, dims):
    """Key k of every record joined along its axis, and each record's extent along it."""
    dt, ndim, axis = schema.dtypes[k], schema.ndims[k], schema.axes[k]
    if ndim == 0:
        return _gather_bytes(mv, payload, payload + dt.itemsize).view(dt), counts
    shape0 = [int(v) for v in dims[0, schema.dim0[k]:schema.dim0[k] + ndim]]
    sizes = dims[:, schema.joined[k]].copy()
    lead = math.prod(shape0[:axis])  # rows of the leading axes: a segment each
    seg = (counts // max(lead, 1)) * dt.itemsize
    if lead == 1:
        lo, hi = payload, payload + seg
    else:
        lo = (payload[None, :] + np.arange(lead)[:, None] * seg[None, :]).reshape(-1)
        hi = lo + np.tile(seg, lead)
    shape = (*shape0[:axis], int(sizes.sum()), *shape0[axis + 1:])
    return _gather_bytes(mv, lo, hi).view(dt).reshape(shape), sizes


def _gather_bytes(mv: memoryview, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """mv[lo[0]:hi[0]] + mv[lo[1]:hi[1]] + ... as one new writable, 16-byte aligned array
    (one C-level join over memoryview slices: within ~1.5x of a memcpy of the same bytes)."""
    joined = bytearray().join(map(mv.__getitem__, map(slice, lo.tolist(), hi.tolist())))
    out = np.frombuffer(joined, dtype=np.uint8)
    return out if out.ctypes.data % 16 == 0 else out.copy()


def gather_columns(buf: np.ndarray, offsets: Sequence[int], nbytes: Sequence[int],
                   axis_of: AxisOf = lambda name, ndim: 0) -> Columns | None:
    """One-off :class:`Gather` (no schema kept between calls)."""
    return Gather(axis_of)(buf, offsets, nbytes)


def part_starts(sizes) -> np.ndarray:
    """[0, s0, s0+s1, ..., sum]: where each part starts, plus the end (int64)."""
    out = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return out
