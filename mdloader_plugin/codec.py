"""One graph sample <-> one contiguous byte record. No pickle, ever.

A sample is a mapping of names to arrays of any dtype and shape (``x``, ``pos``, ``edge_index``,
``y``, a ``[3, 3]`` cell, a zero-size ``edge_attr`` ...). Its record is::

    offset  size  field
    0       4     magic b"MDLG"
    4       1     format version (1)
    5       1     number of arrays K
    6       2     reserved (0)
    8       4     header length H (multiple of 8; payloads start here)
    12      4     total record length (multiple of 8)
    16      ...   K entries: name length u8, dtype code u8, ndim u8, pad u8,
                  payload offset u32 (from record start), shape as ndim x int64, name bytes
    H       ...   payloads, each starting on an 8-byte boundary

Records are padded to 8 bytes so that records laid end to end keep every payload aligned.
:func:`decode` returns numpy views into the caller's buffer: the only copy a fetched sample ever
sees is the one the network (or local memcpy) made into that buffer. Tensors built from the views
with ``torch.from_numpy`` share that memory too.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

MAGIC = b"MDLG"
VERSION = 1
_FIXED = struct.Struct("<4sBBHII")
_ENTRY = struct.Struct("<BBBBI")

# Stable codes: never renumber, only append.
_DTYPES = [
    np.dtype(np.bool_), np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16),
    np.dtype(np.uint16), np.dtype(np.int32), np.dtype(np.uint32), np.dtype(np.int64),
    np.dtype(np.uint64), np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64),
    np.dtype(np.complex64), np.dtype(np.complex128),
]
_CODE_OF = {dt: i for i, dt in enumerate(_DTYPES)}


class CodecError(ValueError):
    """A record is malformed or an array cannot be encoded."""


def _align8(n: int) -> int:
    return (n + 7) & ~7


def dtype_code(dtype) -> int:
    dt = np.dtype(dtype).newbyteorder("=") if np.dtype(dtype).byteorder == ">" else np.dtype(dtype)
    try:
        return _CODE_OF[dt]
    except KeyError:
        raise CodecError(f"dtype {np.dtype(dtype)} is not supported; supported: "
                         + ", ".join(str(d) for d in _DTYPES)) from None


def _layout(arrays: Mapping[str, np.ndarray]):
    """Header length, payload offsets and total length for these arrays."""
    if len(arrays) > 255:
        raise CodecError(f"a sample may hold at most 255 arrays, got {len(arrays)}")
    head = _FIXED.size
    for name, arr in arrays.items():
        dtype_code(arr.dtype)
        nb = len(name.encode())
        if not 0 < nb < 256:
            raise CodecError(f"array name {name!r} must be 1..255 bytes of UTF-8")
        head += _ENTRY.size + 8 * arr.ndim + nb
    head = _align8(head)
    offsets, pos = [], head
    for arr in arrays.values():
        offsets.append(pos)
        pos = _align8(pos + arr.nbytes)
    return head, offsets, pos


def record_size(arrays: Mapping[str, np.ndarray]) -> int:
    """Bytes :func:`encode` will use for this sample (a multiple of 8)."""
    return _layout({k: np.asarray(v) for k, v in arrays.items()})[2]


def encode_into(buf: np.ndarray, start: int, arrays: Mapping[str, np.ndarray]) -> int:
    """Write the record of `arrays` into uint8 `buf` at `start`; return its length."""
    arrays = {k: _native(v) for k, v in arrays.items()}
    head, offsets, total = _layout(arrays)
    if total >= 2**32:
        raise CodecError(f"a sample of {total} bytes exceeds the 4 GiB record limit")
    if start + total > buf.size:
        raise CodecError(f"buffer of {buf.size} bytes too small for a {total}-byte record at {start}")
    mv = memoryview(buf)[start:start + total]
    _FIXED.pack_into(mv, 0, MAGIC, VERSION, len(arrays), 0, head, total)
    pos = _FIXED.size
    for (name, arr), off in zip(arrays.items(), offsets):
        raw = name.encode()
        _ENTRY.pack_into(mv, pos, len(raw), dtype_code(arr.dtype), arr.ndim, 0, off)
        pos += _ENTRY.size
        struct.pack_into(f"<{arr.ndim}q", mv, pos, *arr.shape)
        pos += 8 * arr.ndim
        mv[pos:pos + len(raw)] = raw
        pos += len(raw)
    buf[start + pos:start + head] = 0
    for arr, off in zip(arrays.values(), offsets):
        flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        end = start + off + flat.size
        buf[start + off:end] = flat
        buf[end:start + _align8(off + flat.size)] = 0
    return total


def _native(a) -> np.ndarray:
    """Little-endian (native here) arrays are stored as they are; others are converted."""
    a = np.asarray(a)
    return a.astype(a.dtype.newbyteorder("=")) if a.dtype.byteorder == ">" else a


def encode(arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """The record of one sample as a new uint8 array."""
    arrays = {k: _native(v) for k, v in arrays.items()}
    buf = np.empty(record_size(arrays), dtype=np.uint8)
    encode_into(buf, 0, arrays)
    return buf


def decode(buf, start: int = 0, nbytes: int | None = None) -> dict[str, np.ndarray]:
    """Arrays of the record at `start` of `buf`, as views (no copy). Never unpickles."""
    mv = memoryview(buf).cast("B") if not isinstance(buf, np.ndarray) else memoryview(buf)
    limit = len(mv) - start if nbytes is None else nbytes
    if limit < _FIXED.size:
        raise CodecError(f"record at byte {start} is truncated ({limit} bytes)")
    magic, version, count, _, head, total = _FIXED.unpack_from(mv, start)
    if magic != MAGIC:
        raise CodecError(f"no MDLoader record at byte {start} (magic {bytes(magic)!r})")
    if version != VERSION:
        raise CodecError(f"record format version {version} is not supported (this MDLoader "
                         f"reads version {VERSION}); re-create the store with this version")
    if total > limit or head > total:
        raise CodecError(f"record at byte {start} claims {total} bytes but {limit} are there")
    out, pos = {}, start + _FIXED.size
    for _ in range(count):
        nlen, code, ndim, _, off = _ENTRY.unpack_from(mv, pos)
        pos += _ENTRY.size
        shape = struct.unpack_from(f"<{ndim}q", mv, pos)
        pos += 8 * ndim
        name = bytes(mv[pos:pos + nlen]).decode()
        pos += nlen
        if code >= len(_DTYPES):
            raise CodecError(f"array {name!r}: unknown dtype code {code}")
        dt = _DTYPES[code]
        n = math.prod(shape)  # ints from the header (np.prod cost ~15 us a call)
        if off + n * dt.itemsize > total:
            raise CodecError(f"array {name!r} runs past the end of its record")
        out[name] = np.frombuffer(mv, dtype=dt, count=n, offset=start + off).reshape(shape)
    return out


@dataclass
class Columns:
    """The arrays of many records of one schema, each concatenated over the records.

    ``arrays[k]`` joins every record's ``k`` along axis ``axis[k]`` (0-d arrays become one entry
    each); ``sizes[k][i]`` is record i's extent along that axis. Fresh memory: nothing refers to
    the buffer the records came from."""

    arrays: dict
    sizes: dict
    axis: dict
    count: int


def _template(mv, start: int, limit: int):
    """Header of the record at `start`: (head, entries) with each entry's name, dtype, ndim and
    the header positions of its payload offset and shape."""
    magic, version, count, _, head, total = _FIXED.unpack_from(mv, start)
    if magic != MAGIC or version != VERSION or not head <= total <= limit:
        return None
    entries, pos = [], _FIXED.size
    for _ in range(count):
        nlen, code, ndim, _, _ = _ENTRY.unpack_from(mv, start + pos)
        if code >= len(_DTYPES):
            return None
        name = bytes(mv[start + pos + _ENTRY.size + 8 * ndim:][:nlen]).decode()
        entries.append((name, _DTYPES[code], ndim, pos + 4, pos + _ENTRY.size))
        pos += _ENTRY.size + 8 * ndim + nlen
    return head, entries


def gather_columns(buf: np.ndarray, offsets: Sequence[int], nbytes: Sequence[int],
                   axis_of: Callable[[str, int], int] = lambda name, ndim: 0) -> Columns | None:
    """Concatenate the arrays of the records at `offsets` of uint8 `buf`, key by key.

    ``axis_of(name, ndim)`` gives the axis to join along (0 or ``ndim - 1``). The headers are
    read as one [records, header] array, so the cost is a few numpy calls per key plus one slice
    per record and key, not a Python decode per record. Returns None when the records do not
    share one schema (same names, dtypes and ranks in the same order), or when they disagree on
    the extents that are not joined: the caller then takes the per-record path (which also
    reports the record that is malformed)."""
    starts = np.asarray(offsets, dtype=np.int64)
    limits = np.asarray(nbytes, dtype=np.int64)
    if starts.size == 0 or int(limits.min()) < _FIXED.size:
        return None
    mv = memoryview(buf).cast("B")
    tpl = _template(mv, int(starts[0]), int(limits[0]))
    if tpl is None or int(limits.min()) < tpl[0]:
        return None
    head, entries = tpl
    if int((starts + limits).max()) > buf.size:
        return None
    hdr = buf[starts[:, None] + np.arange(head)]
    if not _same_schema(hdr, entries, head):
        return None
    totals = _u32(hdr, 12)
    if np.any(totals > limits):
        return None
    cols = Columns({}, {}, {}, int(starts.size))
    for name, dt, ndim, off_at, shape_at in entries:
        shapes = hdr[:, shape_at:shape_at + 8 * ndim].copy().view("<i8").reshape(len(hdr), ndim)
        got = _join(mv, starts + _u32(hdr, off_at), totals - _u32(hdr, off_at), dt, shapes,
                    axis_of(name, ndim) if ndim else 0)
        if got is None:
            return None
        cols.arrays[name], cols.sizes[name] = got
        cols.axis[name] = axis_of(name, ndim) if ndim else 0
    return cols


def _u32(hdr: np.ndarray, at: int) -> np.ndarray:
    return hdr[:, at:at + 4].copy().view("<u4").reshape(-1).astype(np.int64)


def _same_schema(hdr: np.ndarray, entries, head: int) -> bool:
    """Every header byte that is not a length, payload offset or shape equals record 0's."""
    fixed = np.ones(head, dtype=bool)
    fixed[12:16] = False  # total length
    for _, _, ndim, off_at, shape_at in entries:
        fixed[off_at:off_at + 4] = False
        fixed[shape_at:shape_at + 8 * ndim] = False
    return bool(np.all(hdr[:, fixed] == hdr[0, fixed]))


def _join(mv, payload, room, dt, shapes, axis):
    """One key of every record joined along `axis`, and each record's extent along it."""
    ndim = shapes.shape[1]
    if ndim == 0:  # scalars: one entry each
        counts = sizes = np.ones(len(shapes), np.int64)
        rest = ()
    else:
        if np.any(shapes < 0) or np.any(shapes[:, :axis] != shapes[0, :axis]) or \
                np.any(shapes[:, axis + 1:] != shapes[0, axis + 1:]):
            return None
        counts, sizes = shapes.prod(axis=1), shapes[:, axis]
        rest = tuple(int(v) for v in shapes[0])
    if np.any(counts * dt.itemsize > room) or ndim and np.any(
            np.prod(shapes.astype(np.float64), axis=1) * dt.itemsize > room):  # int64 wrap
        return None
    lead = math.prod(rest[:axis])  # rows of the leading axes, each a separate segment
    seg = (counts // max(lead, 1)) * dt.itemsize
    lo = (payload[None, :] + np.arange(lead)[:, None] * seg[None, :]).reshape(-1)
    hi = lo + np.tile(seg, lead)
    raw = _gather_bytes(mv, lo, hi)
    shape = (*rest[:axis], int(sizes.sum()), *rest[axis + 1:]) if ndim else (len(counts),)
    return raw.view(dt).reshape(shape), sizes.astype(np.int64)


def _gather_bytes(mv: memoryview, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """mv[lo[0]:hi[0]] + mv[lo[1]:hi[1]] + ... as one new writable, 16-byte aligned array
    (one C-level join over memoryview slices: within ~1.5x of a memcpy of the same bytes)."""
    joined = bytearray().join(map(mv.__getitem__, map(slice, lo.tolist(), hi.tolist())))
    out = np.frombuffer(joined, dtype=np.uint8)
    return out if out.ctypes.data % 16 == 0 else out.copy()
