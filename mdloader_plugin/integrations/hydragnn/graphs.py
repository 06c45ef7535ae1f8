"""Graph samples as HydraGNN sees them, and the data facts its config step needs.

Both loaders (MDLoader and the baseline) turn a graph's arrays into the same
``torch_geometric.data.Data`` with :func:`make_to_sample`, so the model sees identical inputs.

HydraGNN's ``update_config`` learns two facts by iterating the loaders: whether graph sizes vary
(``check_if_graph_size_variable``, which stops at a data-dependent batch) and, for PNA, the degree
histogram (``gather_deg``, two passes over the train set). With a loader that runs a collective
per batch, the first abandons iteration at different batches on different ranks and the job
deadlocks. So update_config gets :class:`ConfigView` objects instead of the real loaders: they
yield per-graph node counts read from the file (plain reads, safe to abandon anywhere) and carry
``dataset[0]`` and ``pna_deg``. HydraGNN's own code still computes the answers; only its input
differs. The PNA degree histogram is computed once from each rank's block of the file and summed
over MPI (or taken from the file's ``pna_deg`` attribute when present).

Several files (``Dataset.path`` a list): node counts run over the files in order, sample 0 is the
first file's (tagged with data set id 0), ``y``'s range is taken over all files, and ``pna_deg``
is the files' attributes merged as HydraGNN's multibranch example merges them
(:func:`~mdloader_plugin.sources.multi.merge_pna_deg`) or, without them, the summed histograms.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Callable, Iterator, Sequence

import numpy as np

from ...batching import ColumnTransform
from ...sources.adios import GraphFile

_CHUNK = 65536  # graphs a read when scanning node counts


class HydraSample(ColumnTransform):
    """``arrays -> Data``: x columns picked by ``input_node_features``, y as a column (min-max
    scaled when `y_minmax` is given), float64 as float32, ``edge_index`` as int64; every other
    key is kept. Each key's map works the same on one graph's array and on a batch's joined
    one, so MDLoader runs it once a batch (:mod:`mdloader_plugin.batching`)."""

    def __init__(self, node_features: Sequence[int] | None,
                 y_minmax: tuple[float, float] | None):
        self.cols = list(node_features) if node_features is not None else None
        self.y_minmax = y_minmax

    def column(self, key: str, a: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        if key == "x" and self.cols is not None and a.ndim == 2:
            a = a[:, self.cols]
        if key == "y":
            a = a.reshape(-1, 1)
            if self.y_minmax is not None:
                lo, hi = self.y_minmax
                a = (a - lo) / (hi - lo if hi > lo else 1.0)
            a = a.astype(np.float32, copy=False)
        elif a.dtype == np.float64:
            a = a.astype(np.float32)
        if key == "edge_index":
            a = a.astype(np.int64, copy=False)
        if not a.flags.writeable:
            a = a.copy()
        return np.ascontiguousarray(a)


def make_to_sample(node_features: Sequence[int] | None,
                   y_minmax: tuple[float, float] | None) -> HydraSample:
    """The ``to_sample`` that turns a decoded record into HydraGNN's ``Data`` (node features
    selected, ``y`` min-max scaled when ``y_minmax`` is given)."""
    return HydraSample(node_features, y_minmax)


def files_of(path) -> list[str]:
    """``Dataset.path`` (a file, or a list of data set entries) as a list of files."""
    return [path] if isinstance(path, str) else [e["path"] for e in path]


def y_minmax(path, label: str = "trainset") -> tuple[float, float]:
    """Min and max of ``y`` over a label of the file(s) (bulk reads, same on every rank)."""
    lo, hi = np.inf, -np.inf
    for p in files_of(path):
        with GraphFile(p) as f:
            info = f.info(label)
            y = f.read_block(label, 0, info.ndata, keys=["y"], info=info).arrays["y"]
        lo, hi = min(lo, float(np.min(y))), max(hi, float(np.max(y)))
    return lo, hi


def _size_key(info) -> str:
    return "x" if "x" in info.keys else next(iter(info.keys))


def node_counts(path, label: str) -> Iterator[int]:
    """Node count of every graph of `label` (file after file), read in chunks (abandoning it is
    free)."""
    for p in files_of(path):
        yield from _file_node_counts(p, label)


def _file_node_counts(path: str, label: str) -> Iterator[int]:
    with GraphFile(path) as f:
        info = f.info(label)
        key = _size_key(info)
        for lo in range(0, info.ndata, _CHUNK):
            cnt, _ = f.read_extents(label, key, lo, min(lo + _CHUNK, info.ndata))
            yield from (int(c) for c in cnt)


class _Dataset:
    """``dataset[0]`` (and ``pna_deg`` when known) for update_config."""

    def __init__(self, sample0, n: int, pna_deg: list[int] | None):
        self._sample0, self._n = sample0, n
        if pna_deg is not None:
            self.pna_deg = pna_deg

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int):
        if i != 0:
            raise IndexError("ConfigView holds only sample 0")
        return self._sample0


class ConfigView:
    """Stands in for a loader inside HydraGNN's update_config (see module docstring)."""

    def __init__(self, path: str, label: str, sample0, ndata: int,
                 pna_deg: list[int] | None = None):
        self.path, self.label = path, label
        self.dataset = _Dataset(sample0, ndata, pna_deg)
        self.sampler = None

    def __iter__(self):
        return (SimpleNamespace(num_nodes=n) for n in node_counts(self.path, self.label))

    def __len__(self) -> int:
        return len(self.dataset)


def first_sample(path, label: str, to_sample: Callable):
    """Sample 0 and the label's total size (several files: the first file's sample 0, tagged with
    data set id 0 and restricted to the common keys, as MDLoader serves it)."""
    if isinstance(path, str):
        with GraphFile(path) as f:
            info = f.info(label)
            return to_sample(f.read_block(label, 0, 1, info=info).sample(0)), info.ndata
    from ...sources.multi import MultiSource, parse_specs

    with MultiSource(parse_specs(path), label) as src:
        samples, _ = src.read_range(0, 1)
        return to_sample(samples[0]), src.num_samples


def pna_degree(path, comm, label: str = "trainset") -> list[int]:
    """In-degree histogram over `label` (PNA's ``deg``): the file's ``pna_deg`` if present, else
    each rank counts its block and the counts are summed (collective on `comm`). Several files:
    their ``pna_deg`` merged as HydraGNN merges them, else the sum of their histograms."""
    if isinstance(path, str):
        return _file_pna_degree(path, comm, label)
    from ...sources.multi import merge_pna_deg

    files = files_of(path)
    attrs = []
    for p in files:
        with GraphFile(p) as f:
            attrs.append(f.global_attributes().get("pna_deg"))
    if all(a is not None for a in attrs):
        return [int(v) for v in merge_pna_deg(attrs)]
    hists = [_file_pna_degree(p, comm, label) for p in files]
    total = np.zeros(max(len(h) for h in hists), dtype=np.int64)
    for h in hists:
        total[:len(h)] += h
    return [int(v) for v in total]


def _file_pna_degree(path: str, comm, label: str) -> list[int]:
    with GraphFile(path) as f:
        attrs = f.global_attributes()
        if "pna_deg" in attrs:
            return [int(v) for v in np.asarray(attrs["pna_deg"]).reshape(-1)]
        info = f.info(label)
        rank, size = comm.Get_rank(), comm.Get_size()
        lo, hi = info.ndata * rank // size, info.ndata * (rank + 1) // size
        hist = _block_degree_hist(f.read_block(label, lo, hi, keys=[_size_key(info), "edge_index"],
                                               info=info), _size_key(info))
    width = comm.allreduce(len(hist), op=_mpi_max())
    total = np.zeros(width, dtype=np.int64)
    total[:len(hist)] = hist
    return [int(v) for v in comm.allreduce(total)]


def _block_degree_hist(block, size_key: str) -> np.ndarray:
    if len(block) == 0:
        return np.zeros(1, dtype=np.int64)
    ncount = block.counts[size_key]
    ecount = block.counts["edge_index"]
    node_base = np.concatenate([[0], np.cumsum(ncount)[:-1]])
    dst = block.arrays["edge_index"][1] + np.repeat(node_base, ecount)
    deg = np.bincount(dst, minlength=int(ncount.sum()))
    return np.bincount(deg).astype(np.int64)


def _mpi_max():
    from mpi4py import MPI

    return MPI.MAX
