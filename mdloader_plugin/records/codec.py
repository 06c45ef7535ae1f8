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
from typing import Mapping

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
    """The record header's code of a numpy dtype (big-endian taken as native); an unsupported
    dtype is a ``CodecError`` listing the supported ones."""
    dt = np.dtype(dtype).newbyteorder("=") if np.dtype(dtype).byteorder == ">" else np.dtype(dtype)
    try:
        return _CODE_OF[dt]
    except KeyError:
        raise CodecError(f"dtype {np.dtype(dtype)} is not supported; supported: "
                         + ", ".join(str(d) for d in _DTYPES)) from None


def _record_offsets(arrays: Mapping[str, np.ndarray]):
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
    return _record_offsets({k: np.asarray(v) for k, v in arrays.items()})[2]


def encode_into(buf: np.ndarray, start: int, arrays: Mapping[str, np.ndarray]) -> int:
    """Write the record of `arrays` into uint8 `buf` at `start`; return its length."""
    arrays = {k: _native(v) for k, v in arrays.items()}
    head, offsets, total = _record_offsets(arrays)
    if total >= 2**32:
        big = max(arrays, key=lambda k: arrays[k].nbytes)
        raise CodecError(f"a sample of {total} bytes exceeds the record limit of 4 GiB (2**32 - 1 "
                         f"bytes); its largest array is {big!r} ({arrays[big].nbytes} bytes): "
                         "split such samples into smaller graphs before converting")
    if start + total > buf.size:
        raise CodecError(f"buffer of {buf.size} bytes too small for a {total}-byte record at "
                         f"{start}")
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
            raise CodecError(f"array {name!r}: unknown dtype code {code} (valid 0.."
                             f"{len(_DTYPES) - 1}): the record is corrupt or from a newer "
                             "MDLoader; re-convert the file")
        dt = _DTYPES[code]
        n = math.prod(shape)  # ints from the header (np.prod cost ~15 us a call)
        if off + n * dt.itemsize > total:
            raise CodecError(f"array {name!r} runs past the end of its record")
        out[name] = np.frombuffer(mv, dtype=dt, count=n, offset=start + off).reshape(shape)
    return out
