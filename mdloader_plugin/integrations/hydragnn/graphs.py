"""Graph samples as HydraGNN sees them, and the data facts its config step needs.

Both loaders (MDLoader and the baseline) turn a graph's arrays into the same
``torch_geometric.data.Data`` with :func:`make_to_sample`, so the model sees identical inputs.

Targets are rebuilt as upstream's reader does (:class:`Heads`: ``y``/``y_loc`` from
``output_index`` and the Dataset's feature dims, so node-level heads work).

HydraGNN's ``update_config`` learns facts by iterating the loaders: whether graph sizes vary
(``check_if_graph_size_variable``, which stops at a data-dependent batch), the degree histogram
for the PNA family (PNA, PNAPlus, PNAEq: ``gather_deg``, two passes over the train set) and
MACE's ``avg_num_neighbors``. With a loader that runs a collective per batch, the first abandons
iteration at different batches on different ranks and the job deadlocks. So update_config gets
:class:`ConfigView` objects instead of the real loaders: they yield per-graph node counts read
from the file (plain reads, safe to abandon anywhere) and carry ``dataset[0]`` plus the
statistics (:func:`arch_stats`). HydraGNN's own code still computes the answers; only its input
differs. The statistics are computed once from each rank's block of the file and summed over MPI
(the histogram is taken from the file's ``pna_deg`` attribute when present).

Several files (``Dataset.path`` a list): node counts run over the files in order, sample 0 is the
first file's (tagged with data set id 0), ``y``'s range is taken over all files, and ``pna_deg``
is the files' attributes merged as HydraGNN's multibranch example merges them
(:func:`~mdloader_plugin.sources.multi.merge_pna_deg`) or, without them, the summed histograms.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Callable, Iterator, Sequence

import numpy as np

from ...batching.pyg import ColumnTransform, pyg_sample
from ...core.errors import ConfigError
from ...sources.adios import GraphFile
from ...mpi.world import allreduce_number

_CHUNK = 65536  # graphs a read when scanning node counts


class Heads:
    """Where each output head's target lives, from HydraGNN's variable config (as upstream's
    ``update_predicted_values``): a ``graph`` head takes ``dim`` values of ``y`` starting at the
    sum of the graph feature dims before ``output_index``; a ``node`` head takes ``dim`` columns
    of the (unselected) ``x`` starting at the sum of the node feature dims before it."""

    def __init__(self, types: Sequence[str], output_index: Sequence[int],
                 graph_dims: Sequence[int], node_dims: Sequence[int]):
        self.spec = []
        for kind, idx in zip(types, output_index):
            dims = graph_dims if kind == "graph" else node_dims
            if kind not in ("graph", "node"):
                raise ConfigError(f"Variables_of_interest.type: {kind!r} is not graph or node")
            if not 0 <= int(idx) < len(dims):
                raise ConfigError(f"Variables_of_interest.output_index {idx} has no {kind} "
                                  f"feature (Dataset.{kind}_features.dim has {len(dims)})")
            self.spec.append((kind, int(sum(dims[:idx])), int(dims[idx])))
        self.graph_width = int(sum(graph_dims))
        self.graph_only = all(kind == "graph" for kind, _, _ in self.spec)

    @classmethod
    def from_spec(cls, spec: Sequence, graph_width: int) -> "Heads":
        """The heads whose :attr:`spec` and :attr:`graph_width` these are."""
        heads = cls.__new__(cls)
        heads.spec = [(str(k), int(o), int(d)) for k, o, d in spec]
        heads.graph_width = int(graph_width)
        heads.graph_only = all(kind == "graph" for kind, _, _ in heads.spec)
        return heads

    def y(self, y: np.ndarray, x: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """One graph's target column and its ``y_loc`` row (upstream's layout)."""
        parts, loc = [], [0]
        for kind, off, dim in self.spec:
            part = (y.reshape(-1)[off:off + dim] if kind == "graph"
                    else x[:, off:off + dim]).reshape(-1, 1)
            parts.append(part)
            loc.append(loc[-1] + part.shape[0])
        return np.concatenate(parts), np.array([loc], dtype=np.int64)

    def y_joined(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The same for many graphs' ``y`` joined (graph heads only)."""
        rows = y.reshape(-1, self.graph_width)
        cols = np.concatenate([np.arange(off, off + dim) for _, off, dim in self.spec])
        loc = np.cumsum([0] + [dim for _, _, dim in self.spec])
        return rows[:, cols].reshape(-1, 1), np.tile(loc, (rows.shape[0], 1)).astype(np.int64)


def heads_from_config(cfg: dict) -> Heads | None:
    """:class:`Heads` when the config names its targets (``output_index`` and the Dataset's
    feature dims), else None (``y`` is taken as it is in the file)."""
    voi = cfg["NeuralNetwork"]["Variables_of_interest"]
    ds = cfg.get("Dataset") or {}
    gdims = (ds.get("graph_features") or {}).get("dim")
    ndims = (ds.get("node_features") or {}).get("dim")
    if "output_index" not in voi or (gdims is None and ndims is None):
        return None
    return Heads(voi["type"], voi["output_index"], gdims or [], ndims or [])


class HydraSample(ColumnTransform):
    """``arrays -> Data`` as upstream HydraGNN's reader builds it: ``y``/``y_loc`` rebuilt from
    the heads (:class:`Heads`; y min-max scaled first when `y_minmax` is given), then x columns
    picked by ``input_node_features``; floats as `dtype` (float32, or float64 for an fp64 run),
    ``edge_index`` as int64; a uint8 key (a string, as HydraGNN's writer stores one) as ``str``;
    every other key kept. With graph heads only, each key's map works the same on one graph's
    array and on a batch's joined one, so MDLoader runs it once a batch
    (:mod:`mdloader_plugin.batching.pyg`); node heads need each graph's x, so they go graph by
    graph.
    """

    def __init__(self, node_features: Sequence[int] | None,
                 y_minmax: tuple[float, float] | None, heads: Heads | None = None,
                 dtype=np.float32):
        self.cols = list(node_features) if node_features is not None else None
        self.y_minmax, self.heads, self.dtype = y_minmax, heads, np.dtype(dtype)
        if heads is not None and not heads.graph_only:
            self.columns = None  # no column-wise twin: MDLoader takes the per-graph path

    def _scaled_y(self, y: np.ndarray) -> np.ndarray:
        if self.y_minmax is None:
            return y
        lo, hi = self.y_minmax
        return (y - lo) / (hi - lo if hi > lo else 1.0)

    def column(self, key: str, a: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        if key == "x" and self.cols is not None and a.ndim == 2:
            a = a[:, self.cols]
        if key == "y":
            a = self._scaled_y(a.reshape(-1, 1))
        if a.dtype.kind == "f":
            a = a.astype(self.dtype, copy=False)
        if key == "edge_index":
            a = a.astype(np.int64, copy=False)
        if not a.flags.writeable:
            a = a.copy()
        return np.ascontiguousarray(a)

    def columns(self, arrays):
        out = {k: self.column(k, a) for k, a in arrays.items() if k not in ("y", "y_loc")}
        if "y" in arrays:
            y = self._scaled_y(np.asarray(arrays["y"]))
            if self.heads is not None:
                y, out["y_loc"] = self.heads.y_joined(y)
            out["y"] = self.column("_y", y.reshape(-1, 1))
        if "y_loc" in arrays and "y_loc" not in out:
            out["y_loc"] = self.column("y_loc", arrays["y_loc"])
        return {k: out[k] for k in [*arrays, "y_loc"] if k in out}

    def __call__(self, arrays):
        arrays = dict(arrays)
        strings = {k: bytes(np.asarray(a)).decode("utf-8") for k, a in arrays.items()
                   if np.asarray(a).dtype == np.uint8}
        num = {k: a for k, a in arrays.items() if k not in strings}
        if self.heads is not None and "y" in num:
            y, y_loc = self.heads.y(self._scaled_y(np.asarray(num["y"])), num.get("x"))
            out = {k: self.column(k, a) for k, a in num.items() if k not in ("y", "y_loc")}
            out["y"], out["y_loc"] = self.column("_y", y), y_loc
            keys = list(num) + ([] if "y_loc" in num else ["y_loc"])
            data = pyg_sample({k: out[k] for k in keys})
        else:
            data = pyg_sample(ColumnTransform.columns(self, num))
        for k, v in strings.items():
            data[k] = v
        return data


def make_to_sample(node_features: Sequence[int] | None,
                   y_minmax: tuple[float, float] | None, heads: Heads | None = None,
                   dtype=np.float32) -> HydraSample:
    """The ``to_sample`` that turns a decoded record into HydraGNN's ``Data`` (targets rebuilt
    from `heads`, node features selected, ``y`` min-max scaled when ``y_minmax`` is given,
    floats as `dtype`)."""
    return HydraSample(node_features, y_minmax, heads, dtype)


def files_of(path) -> list[str]:
    """``Dataset.path`` (a file, a mapping of split files, or a list of data set entries) as a
    list of files."""
    if isinstance(path, dict):
        return list(dict.fromkeys(path.values()))
    return [path] if isinstance(path, str) else [e["path"] for e in path]


def split_path(path, label: str):
    """What ``Dataset.path`` names for `label`: the split's own file when it is a mapping of
    split files (:func:`~mdloader_plugin.integrations.hydragnn.config.load`), else `path`."""
    return path[label] if isinstance(path, dict) else path


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
    """``dataset[0]`` (and ``pna_deg`` / ``avg_num_neighbors`` when known) for update_config.

    It holds one sample, so it must never be iterated: HydraGNN falls back to iterating the
    dataset for a statistic it was not given (``gather_deg``, ``calculate_avg_deg``), and a
    silent one-graph pass is how PNAPlus once got graph 0's histogram. That is an error here."""

    def __init__(self, sample0, n: int, pna_deg: list[int] | None,
                 avg_num_neighbors: float | None = None):
        self._sample0, self._n = sample0, n
        if pna_deg is not None:
            self.pna_deg = pna_deg
        if avg_num_neighbors is not None:
            self.avg_num_neighbors = avg_num_neighbors

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int):
        if i != 0:
            raise IndexError("ConfigView holds only sample 0")
        return self._sample0

    def __iter__(self):
        raise RuntimeError("HydraGNN iterated the config stand-in's dataset for a statistic "
                           "MDLoader did not supply (see graphs.arch_stats); this is a bug")


class ConfigView:
    """Stands in for a loader inside HydraGNN's update_config (see module docstring)."""

    def __init__(self, path: str, label: str, sample0, ndata: int,
                 pna_deg: list[int] | None = None, avg_num_neighbors: float | None = None):
        self.path, self.label = path, label
        self.dataset = _Dataset(sample0, ndata, pna_deg, avg_num_neighbors)
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


PNA_FAMILY = ("PNA", "PNAPlus", "PNAEq")  # upstream's update_config gives these pna_deg


def arch_stats(mpnn_type: str, path, comm, label: str = "trainset") -> dict:
    """The data statistics upstream's ``update_config`` reads from ``train_loader.dataset`` for
    this architecture, computed from the file: ``pna_deg`` for the PNA family, MACE's
    ``avg_num_neighbors``; nothing for the others (collective on `comm` when computed)."""
    if mpnn_type in PNA_FAMILY:
        return {"pna_deg": pna_degree(path, comm, label)}
    if mpnn_type == "MACE":
        return {"avg_num_neighbors": avg_num_neighbors(path, comm, label)}
    return {}


def avg_num_neighbors(path, comm, label: str = "trainset") -> float:
    """Mean in-degree over every node of `label` (upstream's ``calculate_avg_deg``): edges /
    nodes, each rank counting its block of the file(s) (collective on `comm`)."""
    nodes = edges = 0
    for p in files_of(path):
        with GraphFile(p) as f:
            info = f.info(label)
            lo, hi = _my_block(info.ndata, comm)
            key = _size_key(info)
            nodes += int(f.read_extents(label, key, lo, hi)[0].sum()) if hi > lo else 0
            edges += int(f.read_extents(label, "edge_index", lo, hi)[0].sum()) if hi > lo else 0
    nodes, edges = allreduce_number(comm, nodes), allreduce_number(comm, edges)
    return edges / nodes if nodes else 0.0


def _my_block(ndata: int, comm) -> tuple[int, int]:
    rank, size = comm.Get_rank(), comm.Get_size()
    return ndata * rank // size, ndata * (rank + 1) // size


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
        lo, hi = _my_block(info.ndata, comm)
        hist = _block_degree_hist(f.read_block(label, lo, hi, keys=[_size_key(info), "edge_index"],
                                               info=info), _size_key(info))
    from mpi4py import MPI

    total = np.zeros(allreduce_number(comm, len(hist), "max"), dtype=np.int64)
    total[:len(hist)] = hist
    comm.Allreduce(MPI.IN_PLACE, total, op=MPI.SUM)  # a buffer reduction (allreduce_number's doc)
    return [int(v) for v in total]


def _block_degree_hist(block, size_key: str) -> np.ndarray:
    if len(block) == 0:
        return np.zeros(1, dtype=np.int64)
    ncount = block.counts[size_key]
    ecount = block.counts["edge_index"]
    node_base = np.concatenate([[0], np.cumsum(ncount)[:-1]])
    dst = block.arrays["edge_index"][1] + np.repeat(node_base, ecount)
    deg = np.bincount(dst, minlength=int(ncount.sum()))
    return np.bincount(deg).astype(np.int64)
