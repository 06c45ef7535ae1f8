"""A *joined* data set: several ADIOS2 files in HydraGNN's layout, written side by side (by
``mdloader convert --writers W``, one file a writer rank), read as the one file they make.

On disk: a folder ``OUT`` holding the files (``sub-0000.bp``, ...) and ``mdloader-joined.json``
(:data:`MANIFEST`), written last, which names the files and describes the whole::

    {"format": "mdloader-joined", "version": 1, "files": ["sub-0000.bp", ...],
     "counts": {"trainset": [n0, n1, ...], ...},
     "variables": {"trainset/x": {"Type": "float", "Shape": "1234, 4", "joined": 0,
                                  "extents": [400, 834]}, ...},
     "attributes": {"trainset/keys": {"info": {...}, "file": 0}, ...}}

Each file holds, for every label, a run of the data set's graphs in order (file 0's first); where
a label has graphs, every file stores its keys with the same dtype, fixed dimensions and
``variable_dim`` (the writers agree on them; :func:`describe` refuses files that do not).
:class:`JoinedReader` answers the calls :class:`.adios.GraphFile` makes of ``adios2.FileReader``
as one file in that layout would: ``<label>/ndata`` and ``total_ndata`` are the files' sums;
``<label>/<key>`` is the files' arrays joined along ``variable_dim``; ``variable_count`` joined;
``variable_offset`` joined with each file's values moved by the extent of the files before it;
every other attribute is the first file's that has it. So every reader of MDLoader (the store's
load, ``plan``, ``check``, the HydraGNN and fairchem integrations) reads a joined data set as it
reads one file, byte for byte. The metadata comes from the manifest, and a file is opened only
when a read needs it: a rank loading its block opens the one or two files the block spans, not
all W (at 8,192 ranks and 128 files, 16k opens instead of a million).
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


def write_manifest(folder: str, files: list[str]) -> dict[str, int]:
    """Describe the files `files` of `folder` (:func:`describe`) in its manifest, written
    atomically (a reader sees none or all of it); graphs per label."""
    m = {"format": FORMAT, "version": 1, "files": list(files), **describe(folder, files)}
    path = os.path.join(folder, MANIFEST)
    with open(path + ".tmp", "w") as f:
        json.dump(m, f, indent=1)
    os.replace(path + ".tmp", path)
    return {label: sum(ns) for label, ns in m["counts"].items()}


def describe(folder: str, files: list[str]) -> dict:
    """``{counts, variables, attributes}`` of the files joined, each file opened once (what a
    conversion's rank 0 runs). Files that disagree on a key's dtype, fixed dimensions or
    varying dimension are a DataError."""
    import adios2

    readers = [adios2.FileReader(os.path.join(folder, f)) for f in files]
    try:
        vars_ = [r.available_variables() for r in readers]
        attrs = [r.available_attributes() for r in readers]
        ndata = [{a[:-len("/ndata")]: int(np.asarray(r.read_attribute(a)).reshape(-1)[0])
                  for a in at if a.endswith("/ndata")} for r, at in zip(readers, attrs)]
        counts = {lab: [n.get(lab, 0) for n in ndata] for lab in dict.fromkeys(
            lab for n in ndata for lab in n)}
        attributes = {}
        for i, at in enumerate(attrs):
            for name, info in at.items():
                attributes.setdefault(name, {"info": info, "file": i})
        variables = {}
        for name in dict.fromkeys(n for v in vars_ for n in v):
            key_var = name[:-len(COUNT)] if name.endswith(COUNT) else (
                name[:-len(OFFSET)] if name.endswith(OFFSET) else name)
            have = [i for i, v in enumerate(vars_) if name in v]
            info = {k: v for k, v in vars_[have[0]][name].items() if k not in ("Min", "Max")}
            if f"{key_var}/variable_dim" not in attributes:  # not a key of the layout
                variables[name] = {**info, "joined": None, "file": have[0]}
                continue
            d = 0 if key_var != name else _one_vdim(folder, files, readers, attrs, key_var)
            shapes = [_shape(v[name]) if name in v else None for v in vars_]
            first = shapes[have[0]]
            for i in have:
                s = shapes[i]
                if len(s) != len(first) or s[:d] + s[d + 1:] != first[:d] + first[d + 1:]:
                    raise DataError(f"{os.path.join(folder, files[i])}: {name} has shape {s} "
                                    f"where {files[have[0]]} has {first} (joined along "
                                    f"dimension {d}); the files do not make one data set")
            extents = [s[d] if s is not None else 0 for s in shapes]
            shape = list(first)
            shape[d] = sum(extents)
            info["Shape"] = ", ".join(str(x) for x in shape)
            variables[name] = {**info, "joined": d, "extents": extents}
        return {"counts": counts, "variables": variables, "attributes": attributes}
    finally:
        for r in readers:
            r.close()


def _one_vdim(folder, files, readers, attrs, key_var: str) -> int:
    name = f"{key_var}/variable_dim"
    dims = {int(np.asarray(r.read_attribute(name)).reshape(-1)[0])
            for r, a in zip(readers, attrs) if name in a}
    if len(dims) > 1:
        raise DataError(f"{folder}: {key_var} varies along dimensions {sorted(dims)} in "
                        f"different files of {', '.join(files)}; the files do not make one "
                        "data set (the writers did not agree): convert it again")
    return dims.pop()


def _shape(info: dict) -> list[int]:
    s = info.get("Shape", "")
    return [int(x) for x in s.split(",")] if s.strip() else []


class JoinedReader:
    """A joined data set as one ``adios2.FileReader`` (the calls GraphFile makes): metadata
    from the manifest, each file opened at its first read.

    `check(path, variables)`: run on each file once opened (GraphFile's truncation check)."""

    def __init__(self, path: str, check: Callable[[str, dict], None] | None = None):
        self.path, self.check = path, check
        manifest = os.path.join(path, MANIFEST)
        try:
            with open(manifest) as f:
                m = json.load(f)
            if m.get("format") != FORMAT or not m["files"]:
                raise ValueError("not an MDLoader joined data set")
            self.files = [os.path.join(path, f) for f in m["files"]]
            self.counts = {lab: [int(n) for n in ns] for lab, ns in m["counts"].items()}
            self.vars, self.attrs = dict(m["variables"]), dict(m["attributes"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            why = f"no {exc} entry" if isinstance(exc, KeyError) else str(exc)
            raise DataError(f"{manifest}: unreadable ({why}); convert the data set again") \
                from None
        self.readers: dict[int, object] = {}
        keep = ("joined", "extents", "file")
        self._variables = {n: {k: v for k, v in i.items() if k not in keep}
                           for n, i in self.vars.items()}
        self._attributes = {n: a["info"] for n, a in self.attrs.items()}

    # -- what adios2.FileReader answers -------------------------------------------------------
    def available_variables(self) -> dict:
        return self._variables

    def available_attributes(self) -> dict:
        return self._attributes

    def read_attribute(self, name: str):
        if name.endswith("/ndata") and name[:-len("/ndata")] in self.counts:
            return np.int64(sum(self.counts[name[:-len("/ndata")]]))  # as adios2 gives one
        if name == "total_ndata":
            return np.int64(sum(sum(ns) for ns in self.counts.values()))
        return self._open(self.attrs[name]["file"]).read_attribute(name)

    def read_attribute_string(self, name: str):
        return self._open(self.attrs[name]["file"]).read_attribute_string(name)

    def read(self, name: str, start=None, count=None) -> np.ndarray:
        v = self.vars[name]
        if start is None:
            start, count = [0] * len(_shape(v)), _shape(v)
        start, count = [int(s) for s in start], [int(c) for c in count]
        d = v["joined"]
        if d is None:
            return np.asarray(self._open(v["file"]).read(name, start, count))
        ends = np.cumsum(v["extents"]).tolist()
        lo, hi, out = start[d], start[d] + count[d], None
        for i, (e, n) in enumerate(zip(ends, v["extents"])):
            a, b = max(lo, e - n), min(hi, e)
            if b <= a:
                continue
            s, c = list(start), list(count)
            s[d], c[d] = a - (e - n), b - a
            piece = np.asarray(self._open(i).read(name, s, c)).reshape(c)
            if name.endswith(OFFSET):  # where file i's part of the key starts when joined
                piece += sum(self.vars[name[:-len(OFFSET)]]["extents"][:i])
            if (a, b) == (lo, hi):  # within one file: as read, no copy
                return piece
            if out is None:  # the box, filled file by file (peak: the box and one piece)
                out = np.empty(count, dtype=piece.dtype)
            box = [slice(None)] * len(count)
            box[d] = slice(a - lo, b - lo)
            out[tuple(box)] = piece
        if out is None:
            t = v["Type"]
            return np.zeros(count, dtype={"float": "float32", "double": "float64",
                                          "char": "int8"}.get(t, t.replace("_t", "")))
        return out

    def close(self) -> None:
        for r in self.readers.values():
            r.close()
        self.readers = {}

    # -- files --------------------------------------------------------------------------------
    def _open(self, i: int):
        """File `i`'s reader, opened (and checked against the manifest) at its first use."""
        r = self.readers.get(i)
        if r is not None:
            return r
        import adios2

        sub = self.files[i]
        if not os.path.exists(sub):
            raise DataError(f"{sub}: missing (listed in {MANIFEST}); the joined data set is "
                            "incomplete: convert it again")
        try:
            r = adios2.FileReader(sub)
        except Exception as exc:  # noqa: BLE001 - adios2 raises plain RuntimeError
            raise DataError(f"{sub}: not a readable ADIOS2 file "
                            f"({str(exc).strip().splitlines()[0][:160]})") from None
        try:
            have = r.available_variables()
            if self.check is not None:
                self.check(sub, have)
            for name, v in self.vars.items():
                n = v["extents"][i] if v["joined"] is not None else None
                if n and (name not in have or _shape(have[name])[v["joined"]] != n):
                    raise DataError(f"{sub}: {name} is not the one {MANIFEST} describes; the "
                                    "joined data set is mixed: convert it again")
        except BaseException:
            r.close()
            raise
        self.readers[i] = r
        return r
