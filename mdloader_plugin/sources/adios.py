"""ADIOS2 graph files in the layout HydraGNN's ``AdiosWriter`` writes (the contract).

One step. For every label (``trainset``, ``valset``, ``testset``) and key (``x``, ``edge_index``,
...):

* variable ``<label>/<key>``: the arrays of all graphs concatenated along the key's one varying
  dimension (``edge_index`` along dim 1, node features along dim 0, fixed-shape keys along dim 0);
* int64 variables ``<label>/<key>/variable_count`` and ``<label>/<key>/variable_offset`` of length
  ``ndata``: each graph's extent and (global) start along that dimension;
* attributes ``<label>/<key>/variable_dim``, ``<label>/ndata``, ``<label>/keys``;
* global attributes ``total_ndata`` and optionally ``dataset_name``, ``pna_deg``,
  ``minmax_node_feature``, ``minmax_graph_feature`` (kept as they are).

Reading cost model (measured on the PyPI adios2 2.12 wheel): a per-graph column slice of a
``[2, E]`` array reads the whole span (~200 ms a graph) while a bulk box read costs about its bytes.
So a rank reads its whole contiguous block of graphs with one box selection per key and splits it in
memory; it never reads graph by graph.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping

import numpy as np

from ..core.errors import ConfigError, DataError
from ..core.options import env, env_default
from ..core import deadline
from .joined import JoinedReader, is_joined

LABELS = ("trainset", "valset", "testset")
GLOBAL_ATTRS = ("total_ndata", "dataset_name", "pna_deg", "minmax_node_feature",
                "minmax_graph_feature")


@dataclass
class KeyInfo:
    """How one key is stored for one label."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]  # global shape of the concatenated variable
    vdim: int


@dataclass
class LabelInfo:
    """What a file holds for one label (``trainset`` ...): its number of samples and each key's
    layout."""

    label: str
    ndata: int
    keys: dict[str, KeyInfo] = field(default_factory=dict)


@dataclass
class Block:
    """Graphs ``start..stop-1`` of one label: per key the concatenated array and extents."""

    label: str
    start: int
    stop: int
    arrays: dict[str, np.ndarray]
    counts: dict[str, np.ndarray]
    local_offsets: dict[str, np.ndarray]
    vdims: dict[str, int]
    nbytes_read: int = 0

    def __len__(self) -> int:
        return self.stop - self.start

    def sample(self, i: int) -> dict[str, np.ndarray]:
        """Arrays of graph ``start + i`` (views where the layout allows)."""
        out = {}
        for key, arr in self.arrays.items():
            d, lo = self.vdims[key], int(self.local_offsets[key][i])
            idx = [slice(None)] * arr.ndim
            idx[d] = slice(lo, lo + int(self.counts[key][i]))
            out[key] = arr[tuple(idx)]
        return out

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        return (self.sample(i) for i in range(len(self)))


class GraphFile:
    """Reader of one ADIOS2 file in HydraGNN's layout (or of a joined data set, several such
    files read as one: :mod:`.joined`). Use as a context manager."""

    def __init__(self, path: str | os.PathLike):
        import adios2

        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise DataError(f"{self.path}: no such file or directory; check the path "
                            "(create a file with `mdloader synth` or `mdloader convert`)")
        if is_joined(self.path):  # several files written side by side, read as one
            self._r = JoinedReader(self.path, _check_data_size)
            self._vars = self._r.available_variables()
            self._attrs = self._r.available_attributes()
            return
        try:
            self._r = adios2.FileReader(self.path)
            self._vars = self._r.available_variables()
            self._attrs = self._r.available_attributes()
        except Exception as exc:  # adios2 raises plain RuntimeError/ValueError
            raise DataError(f"{self.path}: not a readable ADIOS2 file ({_first_line(exc)}); "
                            "is it a .bp file written by HydraGNN or `mdloader`?") from None
        _check_data_size(self.path, self._vars)

    def __enter__(self) -> "GraphFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if getattr(self, "_r", None) is not None:
            self._r.close()
            self._r = None

    # -- metadata -------------------------------------------------------------------------
    def attribute(self, name: str):
        if name not in self._attrs:
            raise DataError(f"{self.path}: attribute {name!r} is missing; the file does not "
                            "follow HydraGNN's ADIOS2 layout")
        a = self._attrs[name]
        if a.get("Type") == "string":
            val = self._r.read_attribute_string(name)
            if isinstance(val, str):
                return [val] if name.endswith("/keys") else val
            return list(val) if len(val) != 1 or name.endswith("/keys") else val[0]
        val = np.asarray(self._r.read_attribute(name))
        return val.item() if val.size == 1 and name.endswith(("ndata", "variable_dim")) else val

    def labels(self) -> list[str]:
        return [lab for lab in LABELS if f"{lab}/ndata" in self._attrs] + sorted(
            a[:-len("/ndata")] for a in self._attrs
            if a.endswith("/ndata") and a != "total_ndata" and a[:-len("/ndata")] not in LABELS)

    def global_attributes(self) -> dict:
        return {n: self.attribute(n) for n in GLOBAL_ATTRS if n in self._attrs}

    def info(self, label: str) -> LabelInfo:
        if f"{label}/ndata" not in self._attrs:
            have = ", ".join(self.labels()) or "none"
            raise DataError(f"{self.path}: label {label!r} not found (labels here: {have})")
        ndata = int(self.attribute(f"{label}/ndata"))
        if ndata < 0:
            raise DataError(f"{self.path}: {label}/ndata is {ndata}; the file is corrupt")
        if ndata == 0 and f"{label}/keys" not in self._attrs:
            return LabelInfo(label, 0)
        keys = self.attribute(f"{label}/keys")
        keys = [keys] if isinstance(keys, str) else list(keys)
        info = LabelInfo(label, ndata)
        for key in keys:
            name = f"{label}/{key}"
            for need in (name, f"{name}/variable_count", f"{name}/variable_offset"):
                if need not in self._vars:
                    raise DataError(f"{self.path}: variable {need!r} is missing (key {key!r} is "
                                    f"listed in {label}/keys); the file is incomplete")
            _check_extent_vars(self.path, name, self._vars, ndata)
            v = self._vars[name]
            shape = tuple(int(s) for s in v["Shape"].split(",")) if v.get("Shape") else ()
            vdim = int(self.attribute(f"{name}/variable_dim"))
            if not 0 <= vdim < max(len(shape), 1):
                raise DataError(f"{self.path}: {name}/variable_dim={vdim} but {name} has shape "
                                f"{list(shape)}")
            dtype = _adios_dtype(v["Type"], self.path, name)
            if key == "edge_index" and dtype.kind not in "iu":
                raise DataError(f"{self.path}: {name} has ADIOS2 type {v['Type']!r}; edge "
                                "indices must be integers (int64 in HydraGNN's layout)")
            info.keys[key] = KeyInfo(key, dtype, shape, vdim)
        return info

    # -- data ----------------------------------------------------------------------------
    def read_extents(self, label: str, key: str, start: int, stop: int):
        """``(count, offset)`` int64 arrays of graphs ``start..stop-1`` for one key."""
        name = f"{label}/{key}"
        n = stop - start
        cnt = self._read(f"{name}/variable_count", [start], [n]).astype(np.int64, copy=False)
        off = self._read(f"{name}/variable_offset", [start], [n]).astype(np.int64, copy=False)
        return cnt.reshape(-1), off.reshape(-1)

    def read_counts(self, label: str, key: str, start: int, stop: int) -> np.ndarray:
        """Each of graphs ``start..stop-1``'s extent along `key`'s varying dimension (int64):
        all a record's size needs, without the offsets."""
        if stop <= start:
            return np.zeros(0, np.int64)
        cnt = self._read(f"{label}/{key}/variable_count", [start], [stop - start])
        return cnt.astype(np.int64, copy=False).reshape(-1)

    def _read(self, name: str, start: list[int], count: list[int]) -> np.ndarray:
        """One box read; any ADIOS2 failure (truncated or corrupt data) becomes a DataError.

        ADIOS2 2.12's BP5 reader waits forever (holding the GIL) for bytes past the end of a
        truncated data subfile, as if a writer were still appending. `_check_data_size` catches
        truncation beyond the format's slack at open; for the rest, a native deadline thread
        (:mod:`~mdloader_plugin.core.deadline`) prints one line naming the file and aborts every
        rank after ``MDLOADER_READ_TIMEOUT`` s (default 600; 0: no deadline), so an MPI job
        never hangs.
        """
        limit = _read_timeout()
        if limit > 0:
            deadline.arm(limit, f"{self.path}: reading {name!r} (start {start}, count {count}) "
                                f"did not complete in {limit:g} s; the file is truncated or its "
                                "file system stalled: aborting the job (MDLOADER_READ_TIMEOUT "
                                "sets the limit)")
        try:
            arr = np.asarray(self._r.read(name, start, count))
        except DataError:  # a joined data set's file: its own line
            raise
        except Exception as exc:  # adios2 raises RuntimeError/ValueError with multi-line text
            raise DataError(f"{self.path}: reading {name!r} (start {start}, count {count}) "
                            f"failed: {_first_line(exc)}; the file is truncated or "
                            "corrupt") from None
        finally:
            if limit > 0:
                deadline.cancel()
        if arr.size != int(np.prod(count)):
            raise DataError(f"{self.path}: reading {name!r} returned {arr.size} values instead "
                            f"of {int(np.prod(count))}; the file is truncated or corrupt")
        return arr

    def _read_rows(self, name: str, start: list[int], count: list[int], k: KeyInfo):
        """A box whose varying dimension is not the first (``edge_index [2, E]``) read one
        leading row at a time: each row's slice is contiguous in the file, where one box
        selection makes ADIOS2 read and hold the whole span between the rows' slices (measured:
        45 MiB held for an 8 MiB ``edge_index`` box)."""
        if k.vdim == 0 or int(np.prod(count[:k.vdim])) > 64:
            return self._read(name, start, count).reshape(count)
        out = np.empty(count, dtype=k.dtype)
        for lead in np.ndindex(*count[:k.vdim]):
            box = [start[i] + lead[i] for i in range(k.vdim)] + list(start[k.vdim:])
            out[lead] = self._read(name, box, [1] * k.vdim + list(count[k.vdim:])).reshape(
                count[k.vdim:])
        return out

    def read_box(self, name: str, start: list[int], count: list[int]) -> np.ndarray:
        """One box of variable `name` (e.g. one graph's slice, as HydraGNN's reader does)."""
        return self._read(name, list(start), list(count)).reshape(count)

    def read_block(self, label: str, start: int, stop: int, keys: Iterable[str] | None = None,
                   info: LabelInfo | None = None,
                   progress: Callable[[int], None] | None = None) -> Block:
        """Graphs ``start..stop-1`` of `label`: one bulk box read per key.

        `progress(nbytes)` is called after each key with the bytes just read (for a progress bar).
        """
        info = info or self.info(label)
        if not 0 <= start <= stop <= info.ndata:
            raise DataError(f"{self.path}: block {start}..{stop} outside {label} "
                            f"(ndata={info.ndata})")
        keys = list(info.keys) if keys is None else list(keys)
        arrays, counts, locs, vdims, nread = {}, {}, {}, {}, 0
        for key in keys:
            if key not in info.keys:
                raise DataError(f"{self.path}: key {key!r} not in {label} "
                                f"(keys: {', '.join(info.keys)})")
            k = info.keys[key]
            cnt, off = self.read_extents(label, key, start, stop) if stop > start else (
                np.zeros(0, np.int64), np.zeros(0, np.int64))
            lo = int(off[0]) if len(off) else 0
            hi = int(off[-1] + cnt[-1]) if len(off) else 0
            _check_extents(self.path, f"{label}/{key}", cnt, off, k.shape, k.vdim)
            box_start = [0] * len(k.shape)
            box_count = list(k.shape)
            box_start[k.vdim], box_count[k.vdim] = lo, hi - lo
            if hi > lo:
                arr = self._read_rows(f"{label}/{key}", box_start, box_count, k)
            else:
                arr = np.zeros(box_count, dtype=k.dtype)
            if arr.dtype != k.dtype:
                arr = arr.astype(k.dtype)
            arrays[key], counts[key], locs[key], vdims[key] = arr, cnt, off - lo, k.vdim
            nread += arr.nbytes + cnt.nbytes + off.nbytes
            if progress is not None:
                progress(arr.nbytes + cnt.nbytes + off.nbytes)
        return Block(label, start, stop, arrays, counts, locs, vdims, nread)


def _read_timeout() -> float:
    """Seconds a read may take (``$MDLOADER_READ_TIMEOUT``; 0 or less: no deadline)."""
    raw = env("MDLOADER_READ_TIMEOUT")
    try:
        return float(raw) if raw is not None and raw.strip() else float(
            env_default("MDLOADER_READ_TIMEOUT"))
    except ValueError:
        raise ConfigError(f"MDLOADER_READ_TIMEOUT={raw!r} is not a number of seconds; unset it "
                          "or give e.g. 600 (0 turns the read deadline off)") from None


def _check_data_size(path: str, variables: Mapping[str, dict]) -> None:
    """The data subfiles of a ``.bp`` folder must hold at least the variables' payload bytes."""
    if not os.path.isdir(path):
        return
    have = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)
               if f.startswith("data."))
    need = 0
    for name, v in variables.items():
        t = _ADIOS_TYPES.get(v.get("Type", ""))
        if t is None:
            continue
        shape = [int(x) for x in v["Shape"].split(",")] if v.get("Shape") else [1]
        need += int(np.prod(shape)) * np.dtype(t).itemsize
    if have < need:
        raise DataError(f"{path}: data subfiles hold {have} bytes but the variables need "
                        f"{need}; the file is truncated (was a copy or a write interrupted?)")


def _check_extent_vars(path: str, name: str, variables: Mapping[str, dict], ndata: int) -> None:
    """`variable_count`/`variable_offset` of one key: integer type, one entry per graph."""
    for part in ("variable_count", "variable_offset"):
        v = variables[f"{name}/{part}"]
        if v.get("Type") not in _INT_TYPES:
            raise DataError(f"{path}: {name}/{part} has ADIOS2 type {v.get('Type')!r}; HydraGNN's "
                            "layout stores it as int64")
        if v.get("Shape", "").replace(" ", "") != str(ndata):
            raise DataError(f"{path}: {name}/{part} has shape [{v.get('Shape', '')}] but the "
                            f"label's ndata is {ndata}; the file is corrupt")


def _check_extents(path, name, cnt, off, shape, vdim) -> None:
    if len(cnt) == 0:
        return
    if (cnt < 0).any():
        raise DataError(f"{path}: {name}/variable_count has negative entries; the file is corrupt")
    if (np.diff(off) != cnt[:-1]).any():
        i = int(np.argmax(np.diff(off) != cnt[:-1]))
        raise DataError(f"{path}: {name}/variable_offset and variable_count disagree at graph "
                        f"{i + 1} of the block; the file is corrupt or was not written by "
                        "HydraGNN's layout")
    if shape and (off[0] < 0 or off[-1] + cnt[-1] > shape[vdim]):
        raise DataError(f"{path}: {name}/variable_offset points past the end of {name} "
                        f"(dimension {vdim} has {shape[vdim]} entries); the file is truncated "
                        "or corrupt")


_ADIOS_TYPES = {
    "int8_t": np.int8, "uint8_t": np.uint8, "int16_t": np.int16, "uint16_t": np.uint16,
    "int32_t": np.int32, "uint32_t": np.uint32, "int64_t": np.int64, "uint64_t": np.uint64,
    "float": np.float32, "double": np.float64, "char": np.int8, "signed char": np.int8,
    "unsigned char": np.uint8, "float complex": np.complex64, "double complex": np.complex128,
}


_INT_TYPES = ("int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t",
              "uint64_t")


def _adios_dtype(t: str, path: str, name: str) -> np.dtype:
    try:
        return np.dtype(_ADIOS_TYPES[t])
    except KeyError:
        raise DataError(f"{path}: variable {name!r} has ADIOS2 type {t!r}, which MDLoader "
                        "cannot map to a numpy dtype") from None


def _first_line(exc: BaseException) -> str:
    """The first line of an error, without ADIOS2's colour codes and ``[date] [ADIOS2
    EXCEPTION]`` prefix (our messages are one plain line)."""
    s = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip().splitlines()
    s = [re.sub(r"^\[[^\]]*\]\s*\[ADIOS2 EXCEPTION\]\s*", "", s[0])] if s else s
    return s[0][:200] if s and s[0] else type(exc).__name__


# Writing: see writer.py (re-exported here so `from .adios import write_graphs` keeps working)
from .writer import GraphWriter, variable_dim, write_graphs  # noqa: E402,F401
