"""OC20-style LMDB source: values are pickled PyG ``Data`` objects under keys ``b"0"``,
``b"1"``, ... (plus an optional pickled ``b"length"``); a folder of ``*.lmdb`` files is read in
name order.

SECURITY: unpickling runs code chosen by whoever wrote the file. Convert only LMDBs you trust
(the CLI says so on stderr). This is the only place MDLoader unpickles anything.

Kept: every tensor or number of each ``Data`` (``pos``, ``atomic_numbers``, ``cell``, ``natoms``,
``tags``, ``fixed``, ``edge_index``, ``cell_offsets``, ``sid``, ...); strings are skipped. OC20's
legacy names are renamed to fairchem's: ``y`` -> ``energy``, ``force`` -> ``forces`` (when the new
name is absent). Entries are read one at a time inside one read transaction.
"""

from __future__ import annotations

import glob
import os
import pickle
from typing import Iterator

import numpy as np

from ...core.errors import DataError

NAME = "lmdb"
RENAMES = {"y": "energy", "force": "forces"}
WARNING = ("mdloader: warning: reading an OC20 LMDB unpickles its entries, which runs code "
           "chosen by whoever wrote the file; convert only data you trust")


def accepts(path: str) -> bool:
    """Whether ``path`` looks like this source's input."""
    return path.endswith((".lmdb", ".lmdb/")) or (
        os.path.isdir(path) and bool(glob.glob(os.path.join(path, "*.lmdb"))))


def _files(path: str) -> list[str]:
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "data.mdb")):
        files = sorted(glob.glob(os.path.join(path, "*.lmdb")))
        if not files:
            raise DataError(f"{path}: folder holds no *.lmdb files")
        return files
    return [path]


def check_lmdb(path: str) -> None:
    """Refuse an LMDB data file shorter than its own header says (a truncated copy), which the
    lmdb library would map and then crash on (bus error) instead of raising. The file starts
    with two meta pages; the newer one (larger transaction id) gives the page size and the last
    page in use."""
    import struct

    data = os.path.join(path, "data.mdb") if os.path.isdir(path) else path
    size = os.path.getsize(data)
    with open(data, "rb") as f:
        head = f.read(160)
        if len(head) < 152 or struct.unpack_from("<I", head, 16)[0] != 0xBEEFC0DE:
            raise DataError(f"{path}: not an LMDB file (no LMDB header); is it of the format "
                            "named?")
        psize = struct.unpack_from("<I", head, 40)[0]
        metas = [head]
        if 0 < psize <= size:
            f.seek(psize)
            metas.append(f.read(160))
    last, _ = max((struct.unpack_from("<QQ", m, 136) for m in metas if len(m) >= 152),
                  key=lambda m: m[1])
    need = (last + 1) * psize
    if size < need:
        raise DataError(f"{path}: truncated LMDB file ({size} bytes; its header says {need}): "
                        "copy it again")


def _open(path: str):
    import lmdb

    check_lmdb(path)
    try:
        return lmdb.open(path, subdir=os.path.isdir(path), readonly=True, lock=False,
                         readahead=False, meminit=False, max_readers=1)
    except lmdb.Error as exc:
        raise DataError(f"{path}: not a readable LMDB ({exc})") from None


def _length(txn, path: str) -> int:
    raw = txn.get(b"length")
    if raw is None:
        return int(txn.stat()["entries"])
    try:
        return int(pickle.loads(raw))
    except Exception as exc:  # noqa: BLE001 - whatever the pickle held
        raise DataError(f"{path}: entry 'length' is not a pickled integer ({exc})") from None


def count(path: str) -> int:
    """Number of structures in ``path`` (for the progress bar and the split)."""
    total = 0
    for f in _files(path):
        env = _open(f)
        with env.begin() as txn:
            total += _length(txn, f)
        env.close()
    return total


def to_arrays(obj, where: str) -> dict[str, np.ndarray]:
    """A PyG ``Data`` (or a plain dict) as a dict of numpy arrays, OC20 names renamed."""
    import torch

    if hasattr(obj, "to_dict"):
        items = obj.to_dict()
    elif isinstance(obj, dict):
        items = obj
    else:
        raise DataError(f"{where}: holds a {type(obj).__name__}, not a PyG Data or dict")
    out = {}
    for k, v in items.items():
        if isinstance(v, torch.Tensor):
            v = v.detach().cpu().numpy()
        elif isinstance(v, (bool, int, float, np.number)):
            v = np.asarray(v)
        if isinstance(v, np.ndarray) and v.dtype.kind in "biuf":
            out[k] = v if v.ndim else v[None]
    for old, new in RENAMES.items():
        if old in out and new not in out:
            out[new] = out.pop(old)
    return out


def shards(path: str) -> list[str]:
    """The LMDB files of ``path``, the units a parallel conversion splits into ranges."""
    return _files(path)


def iterate(path: str) -> Iterator[dict]:
    """The structures of ``path`` one at a time, each a ``dict`` of numpy arrays."""
    for f in _files(path):
        yield from iterate_range(f, 0, None)


def iterate_range(f: str, start: int, stop: int | None, hint=None) -> Iterator[dict]:
    """Entries ``start..stop-1`` of one LMDB file (all of them for ``stop=None``)."""
    env = _open(f)
    with env.begin() as txn:
        n = _length(txn, f)
        for i in range(start, n if stop is None else stop):
            raw = txn.get(str(i).encode("ascii"))
            if raw is None:
                raise DataError(f"{f}: entry {i} is missing (length says {n})")
            try:
                obj = pickle.loads(raw)  # trusted input only; see WARNING
            except Exception as exc:  # noqa: BLE001
                raise DataError(f"{f}: entry {i} cannot be unpickled ({exc})") from None
            yield to_arrays(obj, f"{f}: entry {i}")
    env.close()
