"""Fetched records -> PyG batch: per sample (the general path) or column-wise (the fast path).

General path: decode each record (views), ``to_sample`` -> ``Data``, then
``Batch.from_data_list``. Its cost is per sample and per key in Python: ~0.1 ms a molecule and
~0.2 ms an OC20 slab on one core, i.e. 25-50 ms for a batch of 256, which on one node is most of
a step for every loader.

Fast path (:class:`ColumnCollate`): the records of a step share one schema, so their headers are
read as one ``[records, header]`` array and each key is joined over all records with one gather
(:mod:`~mdloader_plugin.records.columns`); the sample transform runs once on each joined
column; the ``DataBatch`` is then assembled with the same keys, tensors, ``batch``/``ptr``
vectors and ``_slice_dict``/``_inc_dict`` that ``Batch.from_data_list`` would build. Cost: a few
numpy calls a key plus one slice a record and key: 5-9x less at batch 256. The result owns its
memory, so the receive buffer may be reused as soon as the batch exists.

It is taken only when the result is known to be identical: ``to_sample`` is :func:`pyg_sample`
or declares a column-wise twin (``to_sample.columns``, see :class:`ColumnTransform`),
``collate`` is :func:`pyg_collate`, the samples are plain ``Data`` of ordinary dtypes, and the
first sample built the slow way agrees with the fast result on keys, dtypes and shapes. Anything
else (another ``Data`` subclass, ``num_nodes``/``batch``/``ptr`` keys, sparse tensors, mixed
schemas) takes the general path.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from ..records import codec
from ..records.columns import Columns, Gather, part_starts

_DATA_FIRST = ("x", "edge_index", "edge_attr", "y", "pos")  # Data.__init__'s own arguments
_N_KEYS = ("x", "feat", "pos", "batch", "node_type", "n_id", "tf")  # PyG's node-count keys
_INFER_KEYS = {"num_nodes", "x", "pos", "batch", "adj", "adj_t", "edge_index", "face"}
_DTYPES = {np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64,
                                 np.float16, np.float32, np.float64)}
_INT = {np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.int32, np.int64)}


def pyg_sample(arrays: dict[str, np.ndarray]):
    """Decoded arrays -> ``torch_geometric.data.Data`` (tensors share the fetched buffer).

    Same object as ``Data(**tensors)`` (same keys in the same order), built by filling a fresh
    Data's storage mapping directly: ``Data(**kw)`` goes through ~5 Python layers of
    ``__setattr__`` a key, which was half of the per-sample cost of a batch."""
    import torch
    from torch_geometric.data import Data

    tensors = {k: torch.from_numpy(v) for k, v in arrays.items()}
    data = Data()
    mapping = getattr(getattr(data, "_store", None), "_mapping", None)
    if (not isinstance(mapping, dict) or mapping  # another PyG layout: the public way
            or any(k not in _DATA_FIRST and hasattr(Data, k) for k in tensors)):  # a property
        return Data(**tensors)
    for k in _DATA_FIRST:
        if k in tensors:
            mapping[k] = tensors[k]
    for k, v in tensors.items():
        if k not in mapping:
            mapping[k] = v
    return data


pyg_sample.columns = lambda arrays: arrays  # its column-wise twin: nothing to transform
# how a collate helper process rebuilds it (mdloader_plugin.batching.process.sample_spec)
pyg_sample.helper_spec = lambda: {"factory": f"{__name__}:pyg_sample", "call": False}


def pyg_collate(samples: list):
    """PyG's own collate: ``Batch.from_data_list(samples)`` (what PyG's DataLoader does)."""
    from torch_geometric.data import Batch

    return Batch.from_data_list(samples)


class ColumnTransform:
    """A ``to_sample`` with a column-wise twin: ``column(key, array)`` maps one key's array to
    the final numpy array, and must give the same result on a record's array as on many records
    joined (element- or column-wise maps, reshapes that keep the joined axis)."""

    def column(self, key: str, a: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def columns(self, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: self.column(k, a) for k, a in arrays.items()}

    def __call__(self, arrays: Mapping[str, np.ndarray]):
        return pyg_sample(self.columns(arrays))


def cat_axis(name: str, ndim: int) -> int:
    """PyG's ``Data.__cat_dim__`` for dense tensors: the last axis for index keys, else 0."""
    return ndim - 1 if _is_index(name) and ndim else 0


class ColumnCollate:
    """The fast path for one loader: ``__call__(fetched)`` -> batch, or None (take the general
    path). Falls back for good after the first batch it cannot build, so a data set that never
    fits costs one failed attempt, not one a step."""

    def __init__(self, to_sample: Callable, collate: Callable):
        columns = getattr(to_sample, "columns", None)
        self.enabled = collate is pyg_collate and callable(columns)
        self.to_sample, self._columns = to_sample, columns
        self._gather = Gather(cat_axis)

    def __call__(self, fetched):
        if not self.enabled or len(fetched.offsets) == 0:
            return None
        cols = self._gather(fetched.buf, fetched.offsets, fetched.nbytes)
        batch = None
        if cols is not None:
            o, n = int(fetched.offsets[0]), int(fetched.nbytes[0])
            first = self.to_sample(codec.decode(fetched.buf[o:o + n].copy()))  # no view kept
            batch = build_batch(first, self._columns(cols.arrays), cols)
        self.enabled = batch is not None
        return batch


def build_batch(first, arrays: Mapping[str, np.ndarray], cols: Columns):
    """The ``DataBatch`` of ``cols.count`` samples whose first one is `first` and whose keys
    joined are `arrays`; None when that cannot be made exactly as ``Batch.from_data_list``."""
    import torch
    from torch_geometric.data import Batch, Data

    if type(first) is not Data:
        return None
    keys = list(first._store.keys())
    if set(keys) != set(arrays) or {"num_nodes", "ptr"} & set(keys) or \
            any("batch" in k for k in keys):
        return None
    tensors = {}
    for k in keys:
        t = _tensor(first[k], arrays[k], cols, k)
        if t is None:
            return None
        tensors[k] = t
    nodes = _num_nodes(first, keys, cols)
    if nodes is False:
        return None
    return _assemble(_empty_batch(Batch, Data), keys, tensors, nodes, cols, torch)


_BATCH_TYPE: list = []  # the DataBatch class PyG makes for Data, once a process


def _empty_batch(Batch, Data):
    """``Batch(_base_cls=Data)`` without PyG's per-call metaclass work (a class statement and
    an ``inspect.signature`` each time: ~13% of a small batch's CPU). The class is made once
    through PyG; later instances come from ``type.__call__``, where PyG's metaclass ends up
    (``Data.__init__`` takes no required argument, so it adds none)."""
    if not _BATCH_TYPE:
        out = Batch(_base_cls=Data)
        _BATCH_TYPE.append(type(out))
        return out
    return type.__call__(_BATCH_TYPE[0])


def _tensor(v0, arr: np.ndarray, cols: Columns, key: str):
    """`arr` as a tensor when it is what PyG would have joined from samples like `v0`."""
    import torch

    if type(v0) is not torch.Tensor or v0.is_sparse or arr.dtype not in _DTYPES:
        return None
    t = torch.from_numpy(np.ascontiguousarray(arr))
    if t.dtype != v0.dtype:
        return None
    if v0.dim() == 0:
        return t if t.shape == (cols.count,) else None
    want, axis = list(v0.shape), cat_axis(key, v0.dim())
    sizes = cols.sizes.get(key)
    if sizes is None:  # a key the transform adds (y_loc for a file without one): a row a graph
        if want[axis] != 1:
            return None
        sizes = cols.sizes[key] = np.ones(cols.count, dtype=np.int64)  # this batch's Columns
    if len(want) != t.dim() or int(sizes[0]) != want[axis]:
        return None
    want[axis] = int(sizes.sum())
    return t if list(t.shape) == want else None


def _is_index(key: str) -> bool:
    return "index" in key or key == "face"


def _num_nodes(first, keys: list, cols: Columns):
    """Nodes of each sample as PyG infers them (None: no batch vector; False: cannot tell)."""
    for k in [k for k in keys if k in _N_KEYS] + [k for k in keys if "node" in k]:
        return cols.sizes[k] if first[k].dim() else False
    return False if _INFER_KEYS & set(keys) else None


def _assemble(out, keys, tensors, nodes, cols, torch):
    """Fill `out` as ``collate`` does: keys in order, index keys shifted by the nodes before
    them, then ``batch`` and ``ptr``; the slice and increment tables for ``get_example``."""
    n, store = cols.count, out._store
    mapping = store._mapping if type(getattr(store, "_mapping", None)) is dict else store
    zeros = torch.zeros(n, dtype=torch.long)
    before = None if nodes is None or nodes is False else torch.from_numpy(
        part_starts(nodes)[:-1])  # nodes of the earlier graphs
    slices, incs = {}, {}
    for k in keys:
        t, inc = tensors[k], zeros
        if _is_index(k):  # + the nodes of the samples before
            if before is None or t.numpy().dtype not in _INT:
                return None
            inc = before
            if int(inc[-1]) != 0:
                _shift(t, inc, cols.sizes[k], t.dim() - 1)
        slices[k] = torch.from_numpy(part_starts(cols.sizes[k]))
        incs[k] = inc
        mapping[k] = t  # a fresh batch: nothing cached for the storage's __setitem__ to drop
    if nodes is not None:
        reps = np.asarray(nodes, dtype=np.int64)
        mapping["batch"] = torch.from_numpy(np.repeat(np.arange(n, dtype=np.int64), reps))
        mapping["ptr"] = torch.from_numpy(part_starts(reps))
    out._num_graphs, out._slice_dict, out._inc_dict = n, slices, incs
    return out


def _shift(t, inc, sizes: np.ndarray, axis: int) -> None:
    """Add inc[i] to sample i's part of `t` along `axis` (in place), ~64 samples at a time so
    the temporary stays small."""
    a, inc = t.numpy(), inc.numpy()
    ends = np.cumsum(sizes)
    for lo in range(0, len(sizes), 64):
        hi = min(lo + 64, len(sizes))
        first = int(ends[lo - 1]) if lo else 0
        per = np.repeat(inc[lo:hi], sizes[lo:hi])
        shape = [1] * a.ndim
        shape[axis] = per.size
        part = a[(slice(None),) * axis + (slice(first, int(ends[hi - 1])),)]
        np.add(part, per.reshape(shape), out=part, casting="unsafe")
