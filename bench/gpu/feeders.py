"""Endless batch streams of every loader the GPU-rate benchmark compares (``bench/gpu/rate.py``).

Each ``make(name, ...)`` returns ``(iterator, close)``: the iterator yields PyG batches forever
(epoch after epoch, every rank the same number a step), ``close`` releases the loader
(collective where it holds MPI objects).

- ``collective``, ``onesided``, ``auto``: MDLoader, prefetch 2 (its producer thread runs ahead
  while the trainer computes). (``onesided-process``/``auto-process``, the removed helper-process
  producer, are rows of older results only.)
- ``pyg-nw0``, ``pyg-nw2``: PyG ``DataLoader`` over this rank's own block held in memory as a list
  of ``Data`` (no communication, local shuffle), ``num_workers`` 0 and 2 (forked workers,
  persistent, prefetch factor 2).
- ``hydragnn``: HydraGNN's own loaders (``create_dataloaders``: DataLoader + DistributedSampler,
  via ``integrations/hydragnn/baseline.build_loaders``), graph by graph from the ADIOS2 file,
  HydraGNN's default mode; ``hydragnn-preload``: its ``preload`` mode (whole label a rank).
- ``ddstore-real``: ORNL's DDStore (``bench/ddstore/real.py``, MPI method), HydraGNN's
  ``DistDataset`` layout, fetched in the trainer's thread between ``epoch_begin``/``epoch_end``
  as HydraGNN's train loop does (MPI calls cannot run in forked workers).
"""

from __future__ import annotations

import itertools

MDL = ("collective", "onesided", "auto")
LOADERS = MDL + ("onesided-process", "auto-process", "pyg-nw0", "pyg-nw2", "hydragnn",
                 "hydragnn-preload", "ddstore-real")


def make(name: str, store, path: str, world, batch: int, local_samples: list):
    if name in MDL:
        return _mdl(name, store, batch)
    if name.startswith("pyg-nw"):
        return _pyg_local(local_samples, batch, int(name[len("pyg-nw"):]))
    if name.startswith("hydragnn"):
        return _hydragnn(path, batch, preload=name.endswith("preload"))
    if name == "ddstore-real":
        return _ddstore_real(store, world, batch)
    raise ValueError(f"unknown loader {name!r}; known: {', '.join(LOADERS)}")


def _mdl(name: str, store, batch: int):
    from mdloader_plugin.loader.loader import MDLoader

    loader = MDLoader(store, batch_size=batch, shuffle=True, seed=0, backend=name, prefetch=2,
                      name=f"gpu-{name}")

    def stream():
        for epoch in itertools.count():
            loader.set_epoch(epoch)
            yield from loader

    return stream(), loader.close


def _epochs(loader, set_epoch=None):
    for epoch in itertools.count():
        if set_epoch is not None:
            set_epoch(epoch)
        yield from loader


def _pyg_local(samples: list, batch: int, workers: int):
    import torch
    from torch_geometric.loader import DataLoader

    gen = torch.Generator().manual_seed(0)
    kw = {"persistent_workers": True, "prefetch_factor": 2} if workers else {}
    loader = DataLoader(samples, batch_size=batch, shuffle=True, generator=gen,
                        num_workers=workers, **kw)
    it = _epochs(loader)

    def close():
        it.close()  # ends the workers with the iterator

    return it, close


def _hydragnn(path: str, batch: int, preload: bool):
    from mdloader_plugin.batching.pyg import pyg_sample
    from mdloader_plugin.integrations.hydragnn.baseline import build_loaders

    cfg = {"Dataset": {"path": path}, "hydragnn_loader": {"preload": preload},
           "NeuralNetwork": {"Training": {"batch_size": batch}}, "seed": 0}
    train, _, _ = build_loaders(cfg, pyg_sample, ("trainset",) * 3)
    return _epochs(train, train.sampler.set_epoch), lambda: train.dataset.close()


def _ddstore_real(store, world, batch: int):
    from bench.ddstore.real import RealDDStore
    from mdloader_plugin.sampling.reference import ReferenceSchedule as GlobalSampler

    sampler = GlobalSampler(store.num_samples, world.size, batch, shuffle=True, seed=0)
    dds = RealDDStore(sampler, store, method=0)

    def stream():
        for k in itertools.count():
            yield dds.step(k // sampler.steps_per_epoch, k % sampler.steps_per_epoch)[1]

    return stream(), dds.close
