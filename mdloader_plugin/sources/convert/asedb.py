"""ASE database source: SQLite ``.db`` and ``.aselmdb`` (through the ``ase-db-backends`` package
that fairchem installs). Rows are read in id order through ASE's cursor, one at a time.

Kept per row: everything of :func:`atoms.atoms_to_graph` (positions, numbers, cell, pbc, tags,
fixed, the calculator's energy/forces/stress), numeric ``key_value_pairs`` and numeric
``row.data`` entries.
"""

from __future__ import annotations

import os
from typing import Iterator

from ...core.errors import DataError
from .atoms import atoms_to_graph, numeric
from .oc20lmdb import check_lmdb

NAME = "asedb"


def accepts(path: str) -> bool:
    """Whether ``path`` looks like this source's input: a ``.db``/``.aselmdb`` file, or a folder
    of ``.aselmdb`` files (OC20's and fairchem's ``train/``, ``val/`` layout)."""
    return path.endswith((".db", ".aselmdb")) or bool(_folder_files(path))


def _folder_files(path: str) -> list[str]:
    """The ``*.aselmdb`` files of folder `path`, sorted (empty for a file or another folder)."""
    import glob
    import os

    return sorted(glob.glob(os.path.join(path, "*.aselmdb"))) if os.path.isdir(path) else []


def _files(path: str) -> list[str]:
    return _folder_files(path) or [path]


def shards(path: str) -> list[str]:
    """The files of ``path`` (a folder's ``.aselmdb`` files in name order), the units a parallel
    conversion splits into ranges."""
    return _files(path)


def _connect(path: str):
    import ase.db

    if path.endswith(".aselmdb") and os.path.isfile(path):
        check_lmdb(path)  # a truncated shard would crash the lmdb library (bus error)
    try:
        if path.endswith(".aselmdb"):  # read-only, no lock file: many ranks read one shard
            return ase.db.connect(path, type="aselmdb", readonly=True, use_lock_file=False)
        return ase.db.connect(path, type="db")
    except Exception as exc:  # noqa: BLE001 - sqlite3/lmdb errors
        raise DataError(f"{path}: cannot open as an ASE database ({exc})") from None


def count(path: str) -> int:
    """Number of structures in ``path`` (for the progress bar and the split)."""
    total = 0
    for one in _files(path):
        try:
            total += int(_connect(one).count())
        except DataError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise DataError(f"{one}: not a readable ASE database ({exc})") from None
    return total


def iterate(path: str) -> Iterator[dict]:
    """The structures of ``path`` one at a time (a folder: its files in name order), each a
    ``dict`` of numpy arrays."""
    for one in _files(path):
        yield from _iterate_one(one)


def iterate_range(path: str, start: int, stop: int, hint=None) -> Iterator[dict]:
    """Structures ``start..stop-1`` of one file of :func:`shards` (in :func:`iterate`'s order)."""
    db = _connect(path)
    if hasattr(db, "ids") and hasattr(db, "_get_row"):  # aselmdb: rows by position, no scan
        rows = (db._get_row(i) for i in db.ids[start:stop])
    else:
        rows = db.select(offset=start, limit=stop - start)
    yield from _graphs(rows)


def _iterate_one(path: str) -> Iterator[dict]:
    yield from _graphs(_connect(path).select())


def _graphs(rows) -> Iterator[dict]:
    skipped: set = set()
    for row in rows:
        extra = dict(row.key_value_pairs)
        data = row.get("data") or {}
        for name, value in data.items():
            if numeric(value) is not None:
                extra.setdefault(name, value)
        g = atoms_to_graph(row.toatoms(), None, skipped)
        for name, value in extra.items():  # per-atom data keep their shape, scalars get [1]
            a = numeric(value)
            if a is None:
                skipped.add(name)
            elif name not in g:
                g[name] = a if (a.ndim and len(a) == row.natoms) else a[None]
        yield g
