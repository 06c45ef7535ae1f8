"""A *joined* data set: several ADIOS2 files in HydraGNN's layout, written side by side (by
``mdloader convert --writers W``, one file a writer rank), read as the one file they make.

On disk: a folder ``OUT`` holding the files (``sub-0000.bp``, ...) and ``mdloader-joined.json``
(:data:`MANIFEST`)::

    {"format": "mdloader-joined", "version": 1, "files": ["sub-0000.bp", ...],
     "counts": {"trainset": [n0, n1, ...], "valset": [...], ...}}

Each file holds, for every label, a run of the data set's graphs in order (file 0's first); where
a label has graphs, every file stores its keys with the same dtype, fixed dimensions and
``variable_dim`` (the writers agree on them). :class:`JoinedReader` answers the calls
:class:`.adios.GraphFile` makes of ``adios2.FileReader`` as one file in that layout would:
``<label>/ndata`` and ``total_ndata`` are the files' sums; ``<label>/<key>`` is the files' arrays
joined along ``variable_dim``; ``variable_count`` joined; ``variable_offset`` joined with each
file's values moved by the extent of the files before it; every other attribute is the first
file's that has it. So every reader of MDLoader (the store's load, ``plan``, ``check``, the
HydraGNN and fairchem integrations) reads a joined data set as it reads one file, byte for byte.
HydraGNN's own ``AdiosDataset`` opens one ADIOS2 file: convert with ``--writers 1`` for it.
"""

from __future__ import annotations

import json
import os
from typing import Callable

import numpy as np

from ..core.errors import DataError

MANIFEST = "mdloader-joined.json"
FORMAT = "mdloader-joined"
COUNT, OFFSET = "/variable_count", "/variable_offset"


def is_joined(path: str) -> bool:
    """Whether `path` is a joined data set's folder."""
    return os.path.isfile(os.path.join(path, MANIFEST))


def files_of(path: str) -> list[str]:
    """The files a data set is: a joined one's, as its manifest lists them, or `path`."""
    if not is_joined(path):
        return [path]
    with open(os.path.join(path, MANIFEST)) as f:
        return [os.path.join(path, name) for name in json.load(f)["files"]]


def write_manifest(folder: str, files: list[str], counts: dict[str, list[int]]) -> None:
    """Write `folder`'s manifest (atomically: a reader sees none or all of it)."""
    path = os.path.join(folder, MANIFEST)
    with open(path + ".tmp", "w") as f:
        json.dump({"format": FORMAT, "version": 1, "files": list(files),
                   "counts": {k: [int(n) for n in v] for k, v in counts.items()}}, f, indent=1)
    os.replace(path + ".tmp", path)


class JoinedReader:
    """The files of a joined data set as one ``adios2.FileReader`` (the calls GraphFile makes).

    `check(path, variables)`: run on each file once opened (GraphFile's truncation check)."""

    def __init__(self, path: str, check: Callable[[str, dict], None] | None = None):
        import adios2

        self.path = path
        manifest = os.path.join(path, MANIFEST)
        try:
            with open(manifest) as f:
                m = json.load(f)
            files, counts = list(m["files"]), dict(m["counts"])
            if m.get("format") != FORMAT or not files:
                raise ValueError("not an MDLoader joined data set")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataError(f"{manifest}: unreadable ({exc}); convert the data set again") \
                from None
        self.readers, self.vars, self.attrs = [], [], []
        try:
            for name in files:
                sub = os.path.join(path, name)
                if not os.path.exists(sub):
                    raise DataError(f"{sub}: missing (listed in {MANIFEST}); the joined data "
                                    "set is incomplete: convert it again")
                try:
                    r = adios2.FileReader(sub)
                except Exception as exc:  # noqa: BLE001 - adios2 raises plain RuntimeError
                    raise DataError(f"{sub}: not a readable ADIOS2 file "
                                    f"({str(exc).strip().splitlines()[0][:160]})") from None
                self.readers.append(r)
                self.vars.append(r.available_variables())
                self.attrs.append(r.available_attributes())
                if check is not None:
                    check(sub, self.vars[-1])
            self.names = [os.path.join(path, f) for f in files]
            for label, ns in counts.items():
                have = [self._ndata(i, label) for i in range(len(files))]
                if len(ns) != len(files) or have != [int(n) for n in ns]:
                    raise DataError(f"{path}: {label} holds {have} graphs a file but "
                                    f"{MANIFEST} says {ns}; the joined data set is incomplete "
                                    "or mixed: convert it again")
            self._attributes = {}
            for attrs in self.attrs:
                for name, a in attrs.items():
                    self._attributes.setdefault(name, a)
            self._variables = self._join_variables()
        except BaseException:
            self.close()
            raise

    # -- what adios2.FileReader answers -------------------------------------------------------
    def available_variables(self) -> dict:
        return self._variables

    def available_attributes(self) -> dict:
        return self._attributes

    def read_attribute(self, name: str):
        if name.endswith("/ndata") or name == "total_ndata":
            vals = [np.asarray(r.read_attribute(name)).reshape(-1)[0]
                    for r, a in zip(self.readers, self.attrs) if name in a]
            return np.int64(sum(int(v) for v in vals))  # as adios2 gives one value
        return self.readers[self._first_with(name)].read_attribute(name)

    def read_attribute_string(self, name: str):
        return self.readers[self._first_with(name)].read_attribute_string(name)

    def read(self, name: str, start=None, count=None) -> np.ndarray:
        if start is None:
            start, count = [0] * len(self._shape(name)), list(self._shape(name))
        start, count = [int(s) for s in start], [int(c) for c in count]
        d, extents = self._layouts[name]
        if d is None:
            return np.asarray(self.readers[extents].read(name, start, count))
        ends = np.cumsum(extents)
        lo, hi, pieces = start[d], start[d] + count[d], []
        for i, (e, n) in enumerate(zip(ends.tolist(), extents)):
            a, b = max(lo, e - n), min(hi, e)
            if b <= a:
                continue
            s, c = list(start), list(count)
            s[d], c[d] = a - (e - n), b - a
            piece = np.asarray(self.readers[i].read(name, s, c)).reshape(c)
            if name.endswith(OFFSET):
                piece = piece + self._base(name[:-len(OFFSET)], i)
            pieces.append(piece)
        if not pieces:
            return np.zeros(count, dtype=self._dtype(name))
        return np.concatenate(pieces, axis=d) if len(pieces) > 1 else pieces[0]

    def close(self) -> None:
        for r in self.readers:
            r.close()
        self.readers = []

    # -- joining ----------------------------------------------------------------------------
    def _ndata(self, i: int, label: str) -> int:
        name = f"{label}/ndata"
        if name not in self.attrs[i]:
            return 0
        return int(np.asarray(self.readers[i].read_attribute(name)).reshape(-1)[0])

    def _first_with(self, name: str) -> int:
        for i, a in enumerate(self.attrs):
            if name in a:
                return i
        raise ValueError(f"{self.path}: no attribute {name!r}")

    def _vdim(self, key_var: str) -> int:
        name = f"{key_var}/variable_dim"
        i = self._first_with(name)
        dims = {int(np.asarray(self.readers[j].read_attribute(name)).reshape(-1)[0])
                for j, a in enumerate(self.attrs) if name in a}
        if len(dims) > 1:
            raise DataError(f"{self.path}: {key_var} varies along dimensions {sorted(dims)} in "
                            "different files; the joined data set is mixed: convert it again")
        return int(np.asarray(self.readers[i].read_attribute(name)).reshape(-1)[0])

    def _join_variables(self) -> dict:
        """The variables as one file has them; ``_layouts[name]``: ``(dimension joined, extent
        in each file)``, or ``(None, file)`` for a variable no file joins (read as it is)."""
        self._layouts, out = {}, {}
        for name in dict.fromkeys(n for v in self.vars for n in v):
            key_var = name[:-len(COUNT)] if name.endswith(COUNT) else (
                name[:-len(OFFSET)] if name.endswith(OFFSET) else name)
            joined = f"{key_var}/variable_dim" in self._attributes
            if not joined:
                i = next(j for j, v in enumerate(self.vars) if name in v)
                self._layouts[name], out[name] = (None, i), self.vars[i][name]
                continue
            d = 0 if key_var != name else self._vdim(key_var)
            shapes = [[int(s) for s in v[name]["Shape"].split(",")] if name in v else None
                      for v in self.vars]
            first = next(s for s in shapes if s is not None)
            extents = [s[d] if s is not None else 0 for s in shapes]
            for i, s in enumerate(shapes):
                if s is not None and (len(s) != len(first) or s[:d] + s[d + 1:]
                                      != first[:d] + first[d + 1:]):
                    raise DataError(f"{self.names[i]}: {name} has shape {s} where the first "
                                    f"file has {first} (joined along dimension {d}); the "
                                    "joined data set is mixed: convert it again")
            shape = list(first)
            shape[d] = sum(extents)
            info = dict(next(v[name] for v in self.vars if name in v))
            info["Shape"] = ", ".join(str(s) for s in shape)
            info.pop("Min", None), info.pop("Max", None)
            self._layouts[name], out[name] = (d, extents), info
        return out

    def _base(self, key_var: str, i: int) -> int:
        """Where file `i`'s part of `key_var` starts in the joined array."""
        return int(sum(self._layouts[key_var][1][:i]))

    def _shape(self, name: str) -> list[int]:
        s = self._variables[name].get("Shape", "")
        return [int(x) for x in s.split(",")] if s.strip() else []

    def _dtype(self, name: str) -> np.dtype:
        t = self._variables[name]["Type"]
        return np.dtype({"float": "float32", "double": "float64", "char": "int8"}.get(
            t, t.replace("_t", "")))
