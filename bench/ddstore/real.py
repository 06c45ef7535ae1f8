"""ORNL's real DDStore (``pyddstore``) as a baseline, holding graphs as HydraGNN stores them.

Built by ``tools/build_ddstore.sh`` (bench only). The layout is that of HydraGNN 5.0's
``DistDataset`` in its default per-sample mode (``ddstore_store_per_sample=True``): keys sorted;
every key has at most one variable dimension (agreed over ranks), every sample's arrays packed
into one numpy *structured* record (a field a key, the sample's own shape), the rank's records
end to end in one uint8 array registered as ``<label>/record_array``; the byte offset of every
record is known on every rank (allgathered record sizes, cumsum). A ``get`` of sample ``i``
rebuilds the record's dtype from the per-key counts, allocates it, calls
``ddstore.get(name, buf, offset)`` and views the fields. As HydraGNN's train loop does, every
step is wrapped in ``epoch_begin()`` / ``epoch_end()`` (an ``MPI_Win_fence`` each, collective).

Methods: 0 = MPI RMA (``MPI_Win_create``; ``Lock(SHARED)``/``Get``/``Unlock`` per sample, local
ones too), 1 = libfabric RDMA (``FABRIC_IFACE`` defaults to ``lo`` here). ``fetch`` is the time
from ``epoch_begin`` to ``epoch_end`` (fences and Gets, including DistDataset's per-sample dtype
work); the step then builds ``Data`` and collates exactly as the other baselines do.
"""

from __future__ import annotations

import os
import time

import numpy as np

from bench.loaders.plan_loader import PlanLoader
from mdloader_plugin.records import codec
from mdloader_plugin.loader.loader import pyg_collate, pyg_sample

LABEL = "trainset"


def available() -> bool:
    """Is ``pyddstore`` importable (``tools/build_ddstore.sh`` ran)?"""
    try:
        import pyddstore  # noqa: F401
    except ImportError:
        return False
    return True


class RealDDStore(PlanLoader):
    """Per-sample gets from a ``PyDDStore`` laid out like HydraGNN's ``DistDataset``."""

    def __init__(self, sampler, store, method: int = 0):
        super().__init__(sampler, store.world.rank)
        if method == 1:
            os.environ.setdefault("FABRIC_IFACE", "lo")
        import pyddstore

        self.name = "ddstore-real" if method == 0 else "ddstore-real-fabric"
        self.comm = store.world.comm.Dup()  # DistDataset: one group (ddstore_width = size)
        self.dds = pyddstore.PyDDStore(self.comm, method=method)
        lo, hi = store.local_range
        samples = [codec.decode(store.local_record(i)) for i in range(lo, hi)]
        self._read_schema(samples)
        sizes = [self.record_dtype(lo + j).itemsize for j in range(hi - lo)]
        counts = np.hstack(self.comm.allgather(np.asarray(sizes, dtype=np.int64)))
        self.record_offset = counts.cumsum()
        buf = np.empty(int(sum(sizes)), dtype=np.uint8)
        at = 0
        for j, arrays in enumerate(samples):
            rec = np.zeros(1, dtype=self.record_dtype(lo + j))
            for k in self.keys:
                rec[0][k] = arrays[k]
            buf[at:at + sizes[j]] = rec.view(np.uint8)
            at += sizes[j]
        self.vname = f"{LABEL}/record_array"
        self.buf = buf  # DDStore exposes it (MPI_Win_create): kept alive and unmoved
        self.dds.add(self.vname, buf)

    def _read_schema(self, samples: list[dict]) -> None:
        """Keys, dtypes, variable dims (agreed over ranks) and every sample's count in it."""
        from mpi4py import MPI

        self.keys = sorted(samples[0])
        self.dtype, self.shape, self.vdim, self.count = {}, {}, {}, {}
        for k in self.keys:
            shapes = np.array([a[k].shape for a in samples], dtype=np.int64).reshape(
                len(samples), -1)
            var = np.flatnonzero(shapes.min(axis=0) != shapes.max(axis=0))
            if var.size > 1:
                raise ValueError(f"key {k!r} varies in {var.size} dims; DistDataset takes one")
            vdim = self.comm.allreduce(int(var[0]) if var.size else 0, op=MPI.MAX)
            self.dtype[k], self.shape[k], self.vdim[k] = samples[0][k].dtype, list(
                shapes[0]), vdim
            local = shapes[:, vdim] if shapes.shape[1] else np.ones(len(samples), np.int64)
            self.count[k] = np.hstack(self.comm.allgather(local))

    def record_dtype(self, idx: int) -> np.dtype:
        """DistDataset.get's per-sample dtype: every key's shape with its count at ``idx``."""
        fields = []
        for k in self.keys:
            shape = list(self.shape[k])
            if shape:
                shape[self.vdim[k]] = int(self.count[k][idx])
            fields.append((k, self.dtype[k], tuple(shape)))
        return np.dtype(fields)

    def get(self, idx: int) -> dict:
        dtype = self.record_dtype(idx)
        val = np.zeros(dtype.itemsize, dtype=np.uint8)
        offset = 0 if idx == 0 else int(self.record_offset[idx - 1])
        self.dds.get(self.vname, val, offset)
        rec = val.view(dtype)[0]
        return {k: np.asarray(rec[k]) for k in self.keys}

    def step(self, epoch: int, step: int):
        ids = self.ids(epoch, step).tolist()
        t0 = time.perf_counter()
        self.dds.epoch_begin()
        arrays = [self.get(i) for i in ids]
        self.dds.epoch_end()
        fetch = time.perf_counter() - t0
        return fetch, pyg_collate([pyg_sample(a) for a in arrays])

    def close(self) -> None:
        """Collective: free DDStore's windows and the communicator."""
        if self.dds is not None:
            self.dds.free()
            self.dds = None
            self.comm.Free()
