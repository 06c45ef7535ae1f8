"""The loaders users would otherwise pick, driven step by step by ``bench/loaders/compare.py``.

Every loader here takes the same step plan as MDLoader (:class:`~mdloader_plugin.sampling.reference.
ReferenceSchedule`, same seed: rank ``r`` takes ``plan[r]``), except ``pyg-local``, which by design
never leaves its rank. Each has ``step(epoch, step) -> (fetch_s, batch)``: ``fetch_s`` is the time
to get this rank's samples into its memory (``None`` where it cannot be separated), the rest of
the call decodes and collates exactly as MDLoader does (``pyg_sample`` + ``Batch.from_data_list``).

- ``ddstore``: DDStore-style one-sided reads on the SAME store window MDLoader uses, one
  ``Lock(owner, SHARED)`` / ``Get`` / ``Unlock`` per remote sample (how ORNL DDStore's ``get``
  moves a sample); local samples are a memcpy (kinder to the baseline than DDStore).
- ``ddstore-real``, ``ddstore-real-fabric``: ORNL's real DDStore, MPI and libfabric methods, with
  graphs stored as HydraGNN's ``DistDataset`` stores them (``bench/ddstore/real.py``; built by
  ``tools/build_ddstore.sh``).
- ``file``: HydraGNN's ``AdiosDataset`` default mode, each sample's slice of every key read from
  the ADIOS2 file on demand (:class:`~mdloader_plugin.integrations.hydragnn.baseline.
  AdiosGraphDataset`); on a local page-cached file, so far kinder than a parallel file system.
- ``preload``: the same dataset with ``preload=True``: every rank holds the whole label (the
  memory-hungry ideal: no communication at all, memory = data set per rank).
- ``pyg-local``: a PyG ``DataLoader`` over this rank's own block as a list of ``Data`` (no
  communication and no global shuffle: what "just shard the data" gives).
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from mdloader_plugin.records import codec
from mdloader_plugin.loader.loader import pyg_collate, pyg_sample
from bench.loaders.plan_loader import PlanLoader


class DDStoreStyle(PlanLoader):
    """Per-sample lock / Get / unlock from the owners' windows (see module doc)."""

    name = "ddstore"

    def __init__(self, sampler, store):
        super().__init__(sampler, store.world.rank)
        from mpi4py import MPI

        self.MPI, self.store, self.win = MPI, store, store.window

    def step(self, epoch: int, step: int):
        st, MPI = self.store, self.MPI
        ids = self.ids(epoch, step)
        t0 = time.perf_counter()
        owners = st.owner_of(ids)
        recs = []
        for i, o in zip(ids.tolist(), owners.tolist()):
            off, n = int(st.offsets[i]), int(st.nbytes[i])
            if o == self.rank:
                recs.append(st.buffer[off:off + n].copy())
                continue
            rec = np.empty(n, dtype=np.uint8)
            self.win.Lock(o, MPI.LOCK_SHARED)
            self.win.Get([rec, MPI.BYTE], o, target=(off, n, MPI.BYTE))
            self.win.Unlock(o)
            recs.append(rec)
        fetch = time.perf_counter() - t0
        return fetch, pyg_collate([pyg_sample(codec.decode(r)) for r in recs])


class FilePerSample(PlanLoader):
    """HydraGNN ``AdiosDataset`` default mode: per-sample reads from the file."""

    name = "file"
    preload = False

    def __init__(self, sampler, rank: int, path: str, label: str = "trainset"):
        super().__init__(sampler, rank)
        from mdloader_plugin.integrations.hydragnn.baseline import AdiosGraphDataset

        self.ds = AdiosGraphDataset(path, label, _identity, preload=self.preload)

    def step(self, epoch: int, step: int):
        t0 = time.perf_counter()
        arrays = [self.ds[i] for i in self.ids(epoch, step).tolist()]
        fetch = time.perf_counter() - t0
        return fetch, pyg_collate([pyg_sample(a) for a in arrays])

    def close(self) -> None:
        self.ds.close()


class Preload(FilePerSample):
    """HydraGNN's ``preload`` mode: the whole label in every rank's memory."""

    name = "preload"
    preload = True


class PygLocal(PlanLoader):
    """PyG ``DataLoader`` over this rank's own block, shuffled locally with the same seed."""

    name = "pyg-local"

    def __init__(self, sampler, rank: int, size: int, path: str, label: str = "trainset"):
        super().__init__(sampler, rank)
        import torch
        from torch_geometric.loader import DataLoader

        from mdloader_plugin.sources.adios import GraphFile
        from mdloader_plugin.core.blocks import block_bounds

        with GraphFile(path) as f:
            info = f.info(label)
            b = block_bounds(info.ndata, size)
            block = f.read_block(label, int(b[rank]), int(b[rank + 1]), info=info)
        self.samples = [pyg_sample(block.sample(i)) for i in range(len(block))]
        self.gen = torch.Generator()
        self.loader = DataLoader(self.samples, batch_size=sampler.batch_size, shuffle=True,
                                 generator=self.gen)
        self._it, self._epoch = None, None

    def step(self, epoch: int, step: int):
        if self._it is None or self._epoch != epoch or step == 0:
            self.gen.manual_seed(self.sampler.seed + epoch)
            self._it, self._epoch = iter(self.loader), epoch
        try:
            return None, next(self._it)
        except StopIteration:  # a local block shorter than the global per-rank share
            self._it = iter(self.loader)
            return None, next(self._it)


def _identity(arrays: dict) -> dict:
    return arrays


def _real_ddstore(sampler, store, method: int):
    from bench.ddstore.real import RealDDStore  # needs pyddstore (tools/build_ddstore.sh)

    return RealDDStore(sampler, store, method)


FACTORIES: dict[str, Callable] = {
    "ddstore": lambda sampler, store, path, world: DDStoreStyle(sampler, store),
    "ddstore-real": lambda sampler, store, path, world: _real_ddstore(sampler, store, 0),
    "ddstore-real-fabric": lambda sampler, store, path, world: _real_ddstore(sampler, store, 1),
    "file": lambda sampler, store, path, world: FilePerSample(sampler, world.rank, path),
    "preload": lambda sampler, store, path, world: Preload(sampler, world.rank, path),
    "pyg-local": lambda sampler, store, path, world: PygLocal(sampler, world.rank, world.size,
                                                             path),
}
