"""Several ADIOS2 files, each a named data set, presented as one source with one global index.

Data set ``d`` (in the order given) holds global ids ``starts[d] .. starts[d+1]-1``; a rank's
contiguous block of global ids may span files, and each file is read with one bulk box read per
key for the part that falls in the block (the single-file cost model of :mod:`.adios`). Every
sample gains the key ``dataset_name``: an int64 ``[1, 1]`` array holding its data set's id, the
tensor (name, dtype, shape) HydraGNN 5.0's datasets attach from a file's ``dataset_name``
attribute (``dataset_name_dict[name] = torch.tensor([[i]])``) and that its multibranch heads
route on (``branch-<id>``); batched it becomes ``[B, 1]``.

Keys: the common key set. A key missing from some files is dropped (reported once, naming the
files); a key the caller requires (``required``) missing anywhere, or one key with different dtypes
or different fixed dimensions in two files, is a :class:`~mdloader_plugin.core.errors.DataError`.
PNA degree histograms are merged as HydraGNN's multibranch example merges them: each resampled
to the shortest length by an interpolating spline over ``[0, 1]`` (scipy's
``make_interp_spline``), summed, truncated to int64.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from ..core.blocks import inclusive_bounds

from ..core.errors import ConfigError, DataError
from .adios import GraphFile, LabelInfo

ID_KEY = "dataset_name"


@dataclass(frozen=True)
class DatasetSpec:
    """One named data set: a file, its name (default: its ``dataset_name`` attribute or its
    stem) and an optional sampling weight."""

    path: str
    name: str | None = None
    weight: float | None = None


def parse_specs(items: Iterable) -> list[DatasetSpec]:
    """``NAME=PATH`` strings, plain paths, or mappings ``{path, name, weight}`` -> specs."""
    specs = []
    for item in items:
        if isinstance(item, DatasetSpec):
            specs.append(item)
        elif isinstance(item, dict):
            if "path" not in item:
                raise ConfigError(f"data set {item!r} has no 'path'; give {{name, path}}")
            unknown = sorted(set(item) - {"path", "name", "weight"})
            if unknown:
                raise ConfigError(f"data set {item!r}: unknown key {unknown[0]!r} (keys: path, "
                                  "name, weight)")
            specs.append(DatasetSpec(_expand(item["path"]), item.get("name"), item.get("weight")))
        else:
            name, sep, path = str(item).partition("=")
            specs.append(DatasetSpec(_expand(path), name) if sep else DatasetSpec(_expand(name)))
    if not specs:
        raise ConfigError("no data set given; list at least one file")
    return specs


def _expand(path) -> str:
    return os.path.expanduser(os.path.expandvars(os.fspath(path)))


class MultiSource:
    """Several files' `label` as one source (rank-local: open, inspect, read a block)."""

    def __init__(self, specs: Sequence[DatasetSpec], label: str = "trainset",
                 keys: Sequence[str] | None = None, required: Sequence[str] = ()):
        self.label = label
        self.files = [GraphFile(s.path) for s in specs]
        try:
            self.infos = [f.info(label) for f in self.files]
            self.names = _names(specs, self.files)
            self.keys, self.dropped = _common_keys(self.files, self.infos, keys, required)
        except BaseException:
            self.close()
            raise
        self.sizes = np.array([i.ndata for i in self.infos], dtype=np.int64)
        self.starts = inclusive_bounds(self.sizes)

    def __enter__(self) -> "MultiSource":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for f in self.files:
            f.close()

    @property
    def num_samples(self) -> int:
        return int(self.starts[-1])

    def pieces(self, lo: int, hi: int) -> list[tuple[int, int, int]]:
        """``(dataset, start, stop)`` file-local ranges making up global ids ``lo..hi-1``."""
        out = []
        for d in range(len(self.files)):
            a, b = max(lo, int(self.starts[d])), min(hi, int(self.starts[d + 1]))
            if a < b:
                out.append((d, a - int(self.starts[d]), b - int(self.starts[d])))
        return out

    def read_range(self, lo: int, hi: int,
                   progress: Callable[[int], None] | None = None) -> tuple[list[dict], int]:
        """Samples of global ids ``lo..hi-1`` (each with its ``dataset_name`` id) and bytes read."""
        samples, nread = [], 0
        for d, a, b in self.pieces(lo, hi):
            block = self.files[d].read_block(self.label, a, b, self.keys, self.infos[d], progress)
            tag = np.full((1, 1), d, dtype=np.int64)
            samples.extend({**s, ID_KEY: tag} for s in block)
            nread += block.nbytes_read
        return samples, nread

    def attributes(self) -> dict:
        """Global attributes of the combined source: names, sizes, merged ``pna_deg``."""
        attrs = {"dataset_names": list(self.names), "dataset_sizes": self.sizes.tolist(),
                 "total_ndata": self.num_samples}
        degs = [f.global_attributes().get("pna_deg") for f in self.files]
        if all(d is not None for d in degs):
            attrs["pna_deg"] = merge_pna_deg(degs)
        return attrs


def merge_pna_deg(histograms: Sequence) -> np.ndarray:
    """Sum of the histograms, each resampled to the shortest length by an interpolating spline
    over ``[0, 1]`` (HydraGNN's multibranch merge), as int64."""
    from scipy.interpolate import make_interp_spline

    hists = [np.asarray(h, dtype=np.float64).reshape(-1) for h in histograms]
    m = min(len(h) for h in hists)
    total = np.zeros(m)
    for h in hists:
        spline = make_interp_spline(np.linspace(0, 1, num=len(h)), h, k=min(3, len(h) - 1))
        total += spline(np.linspace(0, 1, num=m))
    return total.astype(np.int64)


def _names(specs: Sequence[DatasetSpec], files: Sequence[GraphFile]) -> list[str]:
    names = []
    for s, f in zip(specs, files):
        name = s.name or f.global_attributes().get("dataset_name") or \
            os.path.splitext(os.path.basename(s.path.rstrip("/")))[0]
        names.append(str(name))
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise DataError(f"data set name {dup[0]!r} is given to two files; name each data set "
                        "once (NAME=PATH)")
    return names


def _common_keys(files, infos: Sequence[LabelInfo], keys, required) -> tuple[list[str], dict]:
    """Keys every file has (in the first file's order), the dropped ones ``{key: [files]}``.
    Files with no samples in the label (no keys listed) do not count."""
    pairs = [(f, i) for f, i in zip(files, infos) if i.ndata > 0] or list(zip(files, infos))
    files, infos = [f for f, _ in pairs], [i for _, i in pairs]
    wanted = list(infos[0].keys) if keys is None else list(keys)
    for info in infos[1:]:
        wanted += [k for k in info.keys if k not in wanted] if keys is None else []
    dropped = {k: [f.path for f, i in zip(files, infos) if k not in i.keys] for k in wanted}
    dropped = {k: v for k, v in dropped.items() if v and k != ID_KEY}
    for key in required:
        if key in dropped:
            raise DataError(f"key {key!r} is missing from {', '.join(dropped[key])} ("
                            f"{infos[0].label}) but the model needs it; add it to those files or "
                            "leave them out")
    common = [k for k in wanted if k not in dropped and k != ID_KEY]
    for key in common:
        _check_same_dtype_and_shape(key, files, infos)
    if not common:
        raise DataError(f"the files {', '.join(f.path for f in files)} share no key in "
                        f"{infos[0].label}; they cannot be combined")
    return common, dropped


def _check_same_dtype_and_shape(key: str, files, infos) -> None:
    ref_f, ref = files[0], infos[0].keys[key]
    for f, info in zip(files[1:], infos[1:]):
        k = info.keys[key]
        if k.dtype != ref.dtype:
            raise DataError(f"key {key!r} is {ref.dtype} in {ref_f.path} but {k.dtype} in "
                            f"{f.path}; convert one file so the dtypes agree")
        fixed = [s for i, s in enumerate(k.shape) if i != k.vdim]
        ref_fixed = [s for i, s in enumerate(ref.shape) if i != ref.vdim]
        if k.vdim != ref.vdim or fixed != ref_fixed:
            raise DataError(f"key {key!r} has per-graph shape {_per_graph(ref)} in {ref_f.path} "
                            f"but {_per_graph(k)} in {f.path}; the files cannot share a model")


def _per_graph(k) -> str:
    return "[" + ", ".join("*" if i == k.vdim else str(s) for i, s in enumerate(k.shape)) + "]"
