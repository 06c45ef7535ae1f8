"""``loader: hydragnn`` — what HydraGNN users run today, over the same ADIOS2 file.

HydraGNN's ``AdiosDataset`` in its default mode reads every graph's ``variable_count`` and
``variable_offset`` once, then on each ``dataset[i]`` reads that graph's slice of every key from
the file. Its class calls the ADIOS2 Python API that current ADIOS2 removed (and newer HydraGNN
needs an MPI-enabled ADIOS2, which PyPI lacks), so :class:`AdiosGraphDataset` does the same reads
with :class:`~mdloader_plugin.sources.adios.GraphFile`: one box read per key per graph (~1 ms a
graph on a small local file; far more on a parallel file system, which is the point of the
comparison). ``preload: true`` is HydraGNN's preload mode: every rank reads the whole label into
memory once and slices it (fast, but memory per rank = the whole data set).

The same class is the drop-in's dataset (:mod:`.dropin`): :meth:`AdiosGraphDataset.upstream_style`
takes upstream's ``AdiosDataset(filename, label, comm, var_config=...)`` arguments and rebuilds the
targets and input columns from ``var_config`` as upstream's reader does.

Several files: one :class:`AdiosGraphDataset` a file (the common keys only, each graph tagged with
its data set's ``dataset_name`` id as MDLoader tags it) joined by a ``ConcatDataset``, so global
index ``i`` is the same graph for both loaders.

The loaders are HydraGNN's own ``create_dataloaders``: a PyG DataLoader with a
DistributedSampler per split (padding makes every rank run the same number of batches).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from ...sources.adios import GraphFile
from . import compat, graphs


class AdiosGraphDataset(torch.utils.data.Dataset):
    """One label of a HydraGNN-layout file, read per sample (or preloaded); ``dataset[i]`` is
    ``to_sample`` of graph `i`'s arrays."""

    def __init__(self, path: str, label: str, to_sample: Callable, preload: bool = False,
                 keys=None, dataset_id: int | None = None):
        self.path, self.label, self.to_sample, self.preload = path, label, to_sample, preload
        self._file = GraphFile(path)
        self.info = self._file.info(label)
        self.keys = list(self.info.keys) if keys is None else list(keys)
        self._tag = None if dataset_id is None else {"dataset_name": np.full((1, 1), dataset_id,
                                                                             dtype=np.int64)}
        attrs = self._file.global_attributes()
        if "pna_deg" in attrs:
            self.pna_deg = np.asarray(attrs["pna_deg"]).reshape(-1).tolist()
        self._extents = {k: self._file.read_extents(label, k, 0, self.info.ndata)
                         for k in self.keys}
        self._block = None
        if preload:
            self._block = self._file.read_block(label, 0, self.info.ndata, self.keys, self.info)
            self._file.close()

    @classmethod
    def upstream_style(cls, filename: str, label: str, comm=None, preload: bool = False,
                       var_config: dict | None = None, dtype=None,
                       **_upstream_only) -> "AdiosGraphDataset":
        """Upstream's ``AdiosDataset(filename, label, comm, preload=..., var_config=...)``
        arguments (the drop-in's ``AdiosDataset``): samples as upstream's
        ``update_data_object`` makes them, targets from `var_config` then the input columns,
        floats as `dtype` (unset: torch's default dtype); `comm` and upstream's other arguments
        change nothing (every rank reads the graphs it is asked for)."""
        dataset = cls(str(filename), label, sample_for(var_config, dtype), preload)
        dataset.var_config = var_config
        return dataset

    def __len__(self) -> int:
        return self.info.ndata

    def get_node_counts(self) -> np.ndarray:
        """Nodes of every graph, from the extents (upstream main's cost-aware batching)."""
        key = "x" if "x" in self._extents else next(iter(self._extents))
        return self._extents[key][0]

    def __getitem__(self, idx: int):
        arrays = (self._block.sample(int(idx)) if self._block is not None
                  else {k: self._read(k, int(idx)) for k in self.keys})
        return self.to_sample({**arrays, **self._tag} if self._tag else arrays)

    def _read(self, key: str, idx: int) -> np.ndarray:
        k = self.info.keys[key]
        cnt, off = self._extents[key]
        start, count = [0] * len(k.shape), list(k.shape)
        start[k.vdim], count[k.vdim] = int(off[idx]), int(cnt[idx])
        if count[k.vdim] == 0:
            return np.zeros(count, dtype=k.dtype)
        return self._file.read_box(f"{self.label}/{key}", start, count).astype(k.dtype, copy=False)

    def close(self) -> None:
        self._file.close()


def float_dtype(dtype=None):
    """numpy's float type for a torch dtype (unset: torch's default dtype)."""
    dtype = dtype if dtype is not None else torch.get_default_dtype()
    return np.float64 if dtype in (torch.float64, np.float64) else np.float32


def sample_for(var_config: dict | None, dtype=None) -> graphs.HydraSample:
    """Upstream's ``update_data_object`` from its ``var_config`` (None: every key as it is)."""
    if var_config is None:
        return graphs.make_to_sample(None, None, dtype=float_dtype(dtype))
    heads = graphs.Heads(var_config["type"], var_config["output_index"],
                         var_config.get("graph_feature_dims", []),
                         var_config.get("node_feature_dims", []))
    return graphs.make_to_sample(var_config.get("input_node_features"), None, heads,
                                 float_dtype(dtype))


def build_loaders(cfg: dict, to_sample: Callable, labels: tuple[str, str, str]):
    """HydraGNN's own train/val/test loaders over :class:`AdiosGraphDataset`."""
    preload = bool(cfg["hydragnn_loader"]["preload"])
    paths = [graphs.split_path(cfg["Dataset"]["path"], label) for label in labels]
    sets = [_concat(path, label, to_sample, preload) if isinstance(path, list) else
            AdiosGraphDataset(path, label, to_sample, preload)
            for path, label in zip(paths, labels)]
    batch_size = int(cfg["NeuralNetwork"]["Training"]["batch_size"])
    batching = cfg["NeuralNetwork"]["Training"].get("Batching")
    kw = {"batching": batching} if batching and batching.get("mode", "fixed") != "fixed" else {}
    loaders = compat.get("create_dataloaders")(*sets, batch_size=batch_size, **kw)
    for loader in loaders:
        if hasattr(loader.sampler, "seed"):
            loader.sampler.seed = int(cfg["seed"])
        if not torch.cuda.is_available():
            loader.pin_memory = False  # HydraGNN asks for it; on CPU it only warns
    return tuple(loaders)


def _concat(entries: list, label: str, to_sample: Callable, preload: bool):
    """The files of `entries` as one dataset: common keys, each graph tagged with its file's id."""
    from ...sources.multi import MultiSource, parse_specs

    specs = parse_specs(entries)
    with MultiSource(specs, label) as src:
        keys = src.keys
        pna = src.attributes().get("pna_deg")
    parts = [AdiosGraphDataset(s.path, label, to_sample, preload, keys, d)
             for d, s in enumerate(specs)]
    joined = torch.utils.data.ConcatDataset(parts)
    if pna is not None:
        joined.pna_deg = [int(v) for v in pna]
    return joined
