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

import math
from typing import Callable, Mapping

import numpy as np

from ..records import codec
from ..records import kernels
from ..records.codec import _CODE_OF
from ..records.columns import Columns, Gather, part_starts

_DATA_FIRST = ("x", "edge_index", "edge_attr", "y", "pos")  # Data.__init__'s own arguments
_N_KEYS = ("x", "feat", "pos", "batch", "node_type", "n_id", "tf")  # PyG's node-count keys
_INFER_KEYS = {"num_nodes", "x", "pos", "batch", "adj", "adj_t", "edge_index", "face"}
_DTYPES = {np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64,
                                 np.float16, np.float32, np.float64)}
_INT = {np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.int32, np.int64)}
_CODE = {dt: _CODE_OF[dt] for dt in _INT}  # the record dtype codes the shift kernel takes


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


def _IDENTITY(arrays):  # noqa: N802 - pyg_sample's column-wise twin: nothing to transform
    return arrays


pyg_sample.columns = _IDENTITY


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
        self._first = None  # (schema, first sample) of the last batch built the checked way
        self._fused: _Fused | None = None  # that batch's layout, for the one-call path

    def __call__(self, fetched):
        if not self.enabled or len(fetched.offsets) == 0:
            return None
        fused = self._fused
        if fused is not None:
            batch = fused(fetched, self._gather)
            if batch is not None:
                return batch
        cols = self._gather(fetched.buf, fetched.offsets, fetched.nbytes)
        batch = None
        if cols is not None:
            arrays = self._columns(cols.arrays)
            schema = self._gather.schema
            if self._first is not None and self._first[0] is schema:  # checked on this schema
                batch = build_batch(self._first[1], arrays, cols, fresh=False)
            if batch is None:  # a new schema (or other dims off the joined axis): check anew
                o, n = int(fetched.offsets[0]), int(fetched.nbytes[0])
                first = self.to_sample(codec.decode(fetched.buf[o:o + n].copy()))  # no view kept
                batch = build_batch(first, arrays, cols)
                self._first = (schema, first) if batch is not None else None
            self._fused = _Fused.of(schema, self._first, batch, cols) \
                if batch is not None and self._columns is _IDENTITY else None
        self.enabled = batch is not None
        return batch


class _Fused:
    """A checked batch's layout (record schema, key order, dims off the joined axis, node
    key), so that a later batch of that layout is built in two compiled calls (``scan`` and
    ``fill``, the GIL released in each) and a few Python calls a key, whatever the batch size.
    Anything that differs (another schema, other dims) returns None: the checked path runs."""

    @classmethod
    def of(cls, schema, first, batch, cols):
        k = kernels.get()
        if k is None or schema is None or first is None or "batch" not in batch._store.keys() \
                or type(getattr(batch._store, "_mapping", None)) is not dict \
                or any(getattr(type(c), a, None) is not None or a not in batch._store.__dict__
                       for c in (batch, batch._store) for a in _BATCH_ATTRS):
            return None
        return cls(k, schema, first[1], batch, cols)

    def __init__(self, k, schema, first, batch, cols):
        self.k, self.schema, names = k, schema, schema.names
        self.keys = [key for key in batch._store.keys() if key not in ("batch", "ptr")]
        self.pos = [names.index(key) for key in self.keys]
        self.node = names.index(self._node_keys(first)[0])  # as _num_nodes picks it
        self.index = {key for key in self.keys if _is_index(key)}
        self.shift = np.array([_CODE[schema.dtypes[j]] if names[j] in self.index else -1
                               for j in range(len(names))], dtype=np.int64)
        dims0 = _dims0(batch, schema, cols)
        first_dim = part_starts(schema.ndims).tolist()
        self.off = [i for j, nd in enumerate(schema.ndims) for i in
                    range(first_dim[j], first_dim[j] + nd) if i != first_dim[j] + schema.axes[j]]
        self.off_dims = [dims0[i] for i in self.off]
        self.shapes, leads = [], []
        for j, nd in enumerate(schema.ndims):
            d, ax = dims0[first_dim[j]:first_dim[j] + nd], schema.axes[j]
            self.shapes.append((tuple(d[:ax]), tuple(d[ax + 1:])) if nd else None)
            leads.append(max(math.prod(d[:ax]), 1) if nd else 1)
        self.leads = np.array(leads, dtype=np.int64)

    @staticmethod
    def _node_keys(first) -> list:
        keys = list(first._store.keys())
        return [k for k in keys if k in _N_KEYS] + [k for k in keys if "node" in k]

    def __call__(self, fetched, gather):
        import torch

        buf, s = fetched.buf, self.schema
        starts, limits = fetched.offsets, fetched.nbytes
        if buf.dtype != np.uint8 or buf.ndim != 1 or not buf.flags.c_contiguous or \
                starts.dtype != np.int64 or limits.dtype != np.int64 or \
                not (starts.flags.c_contiguous and limits.flags.c_contiguous) or \
                starts.size == 0 or gather.schema is not s or \
                not gather.same_schema(buf, int(starts[0]), int(limits[0])):
            return None
        n, nk = starts.size, len(s.names)
        tables = np.empty((3, nk, n), dtype=np.int64)  # payload offset, elements, extent
        if self.k.scan(buf, starts, limits, s.axes_arr, *tables)[0]:
            return None
        dims0 = buf[int(starts[0]) + s.shape_at].view("<i8").tolist() if s.shape_at.size else []
        if [dims0[i] for i in self.off] != self.off_dims:
            return None
        joined = tables[2].sum(axis=1).tolist()
        outs = [np.empty(pre + (joined[j],) + post, dtype=s.dtypes[j]) if sh is not None else
                np.empty(n, dtype=s.dtypes[j])
                for j, sh in enumerate(self.shapes) for pre, post in [sh or ((), ())]]
        slices = np.empty((nk, n + 1), dtype=np.int64)
        vec = np.empty(joined[self.node], dtype=np.int64)
        if self.k.fill(buf, *tables, self.leads, outs, self.shift, self.node, slices, vec):
            return None
        out = _empty_batch(*_pyg_classes())
        store = out._store
        mapping = store._mapping
        zeros = torch.from_numpy(np.zeros(n, dtype=np.int64))
        before = torch.from_numpy(slices[self.node, :-1].copy()) if self.index else None
        slice_d, inc_d = {}, {}
        for key, j in zip(self.keys, self.pos):
            mapping[key] = torch.from_numpy(outs[j])
            slice_d[key] = torch.from_numpy(slices[j])
            inc_d[key] = before if key in self.index else zeros
        mapping["batch"] = torch.from_numpy(vec)
        mapping["ptr"] = torch.from_numpy(slices[self.node].copy())
        # what `out._num_graphs = n` etc. do through PyG's __setattr__ (checked in `of`)
        store.__dict__.update(_num_graphs=n, _slice_dict=slice_d, _inc_dict=inc_d)
        return out


def _dims0(batch, schema, cols) -> list:
    """The first record's dims as the header lists them (from the checked batch's columns:
    the joined axis is the first record's extent, the others are every record's)."""
    out = []
    for name, nd, ax in zip(schema.names, schema.ndims, schema.axes):
        if nd:
            shape = list(cols.arrays[name].shape)
            shape[ax] = int(cols.sizes[name][0])
            out += shape
    return out


def _pyg_classes():
    from torch_geometric.data import Batch, Data

    return Batch, Data


def build_batch(first, arrays: Mapping[str, np.ndarray], cols: Columns, fresh: bool = True):
    """The ``DataBatch`` of ``cols.count`` samples whose first one is `first` and whose keys
    joined are `arrays`; None when that cannot be made exactly as ``Batch.from_data_list``.
    ``fresh=False``: `first` is a sample of an earlier batch of the same record schema, checked
    then (its extent along the joined axis is not this batch's first record's, so only the
    dtypes and the dims off that axis must agree)."""
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
        t = _tensor(first[k], arrays[k], cols, k, fresh)
        if t is None:
            return None
        tensors[k] = t
    nodes = _num_nodes(first, keys, cols)
    if nodes is False:
        return None
    return _assemble(_empty_batch(Batch, Data), keys, tensors, nodes, cols, torch)


_BATCH_ATTRS = ("_num_graphs", "_slice_dict", "_inc_dict")  # kept in the storage's __dict__
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


def _tensor(v0, arr: np.ndarray, cols: Columns, key: str, fresh: bool = True):
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
    if len(want) != t.dim() or (fresh and int(sizes[0]) != want[axis]):
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
        reps = np.ascontiguousarray(nodes, dtype=np.int64)
        mapping["batch"] = torch.from_numpy(_repeat(reps))
        mapping["ptr"] = torch.from_numpy(part_starts(reps))
    out._num_graphs, out._slice_dict, out._inc_dict = n, slices, incs
    return out


def _repeat(reps: np.ndarray) -> np.ndarray:
    """The batch vector: graph i's number repeated reps[i] times (int64)."""
    k = kernels.get()
    if k is not None:
        out = np.empty(int(reps.sum()), dtype=np.int64)
        if not k.repeat(reps, out):
            return out
    return np.repeat(np.arange(reps.size, dtype=np.int64), reps)


def _shift(t, inc, sizes: np.ndarray, axis: int) -> None:
    """Add inc[i] to sample i's part of `t` along `axis` (in place): compiled (GIL released)
    when the axis is the last one, else ~64 samples at a time so the temporary stays small."""
    a, inc = t.numpy(), inc.numpy()
    k = kernels.get()
    if k is not None and axis == a.ndim - 1 and a.flags.c_contiguous and a.dtype in _CODE:
        ext = np.ascontiguousarray(sizes, dtype=np.int64)
        lead = a.size // max(int(ext.sum()), 1) if a.size else 1
        if not k.shift(a, _CODE[a.dtype], ext, inc, max(lead, 1)):
            return
    ends = np.cumsum(sizes)
    for lo in range(0, len(sizes), 64):
        hi = min(lo + 64, len(sizes))
        first = int(ends[lo - 1]) if lo else 0
        per = np.repeat(inc[lo:hi], sizes[lo:hi])
        shape = [1] * a.ndim
        shape[axis] = per.size
        part = a[(slice(None),) * axis + (slice(first, int(ends[hi - 1])),)]
        np.add(part, per.reshape(shape), out=part, casting="unsafe")
