"""A drop-in for upstream HydraGNN's ``create_dataloaders``, for upstream-style training scripts.

HydraGNN 5.0's example scripts build three datasets, then call
``hydragnn.preprocess.create_dataloaders(trainset, valset, testset, batch_size)`` and hand the
loaders to ``update_config`` and ``train_validate_test``. Swapping one import line::

    # from hydragnn.preprocess.load_data import create_dataloaders
    from mdloader_plugin.integrations.hydragnn.dropin import AdiosDataset, create_dataloaders

gives them MDLoader loaders (same signature, same batches: MDLoader's sampler deals what
``DistributedSampler`` with the same seed and shuffle flag deals). The datasets can be:

* :data:`AdiosDataset` (``path``, ``label``, ``var_config`` as upstream's class of that name):
  a real torch dataset (:class:`.baseline.AdiosGraphDataset`, the one ``loader: hydragnn``
  reads) reading one graph a call from a HydraGNN-layout file, so the same script runs with
  HydraGNN's own ``create_dataloaders`` too; the drop-in instead loads each rank's block of the
  file once into an MDLoader store. ``y``/``y_loc`` and the input columns are rebuilt
  from ``var_config`` as upstream's reader does; ``pna_deg`` comes from the file.
* any other indexable dataset of PyG ``Data`` that every rank sees alike (what upstream's
  ``DistributedSampler`` assumes): each rank stores its block of it.

``group`` is an mpi4py communicator or a torch process group (:func:`.compat.comm_of`). Not
honoured (one line, before any data moves): ``oversampling`` (a RandomSampler with replacement
per rank, not a partition). Loaders are closed by :func:`close_dataloaders` (collective) or at
exit.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ...core.errors import ConfigError
from . import baseline, compat, graphs, loaders as _loaders

_OPEN: list = []  # (loader, world) made here, for close_dataloaders

#: Upstream's ``AdiosDataset(filename, label, comm, var_config=...)``: one label of a
#: HydraGNN-layout ADIOS2 file, ``dataset[i]`` read from the file
#: (:meth:`.baseline.AdiosGraphDataset.upstream_style`).
AdiosDataset = baseline.AdiosGraphDataset.upstream_style


def _to_arrays(data) -> dict[str, np.ndarray]:
    out = {}
    for key, value in data.to_dict().items():
        if isinstance(value, str):
            out[key] = np.frombuffer(value.encode("utf-8"), dtype=np.uint8)
        elif hasattr(value, "numpy"):
            out[key] = value.detach().cpu().numpy()
        else:
            out[key] = np.asarray(value)
    return out


def _store(world, dataset, label: str):
    from ...store.shard import ShardStore

    if isinstance(dataset, baseline.AdiosGraphDataset):
        return ShardStore.from_file(world, dataset.path, dataset.label), dataset.to_sample
    n = len(dataset)
    lo, hi = n * world.rank // world.size, n * (world.rank + 1) // world.size
    local = (_to_arrays(dataset[i]) for i in range(lo, hi))
    return (ShardStore.from_samples(world, local, n),
            graphs.make_to_sample(None, None, dtype=baseline.float_dtype()))


def create_dataloaders(trainset, valset, testset, batch_size: int,
                       train_sampler_shuffle: bool = True, val_sampler_shuffle: bool = True,
                       test_sampler_shuffle: bool = True, group=None, oversampling: bool = False,
                       num_samples: Sequence[int] | None = None, *, backend: str = "auto",
                       seed: int = 0, prefetch: int = 2, profile: str | None = None):
    """Upstream's ``create_dataloaders`` signature; returns (train, val, test) MDLoaders.
    Collective over `group` (default: every rank)."""
    from ...loader.loader import MDLoader
    from ...mpi.world import World

    if oversampling:
        raise ConfigError("create_dataloaders(oversampling=True) is not honoured by MDLoader "
                          "(it partitions every epoch exactly once over the ranks); drop "
                          "--oversampling / num_samples or use HydraGNN's own loader")
    world = World.detect(compat.comm_of(group))
    shuffles = (train_sampler_shuffle, val_sampler_shuffle, test_sampler_shuffle)
    made = []
    for dataset, label, shuffle in zip((trainset, valset, testset), _loaders.LABELS, shuffles):
        store, to_sample = _store(world, dataset, label)
        loader = MDLoader(store, batch_size=int(batch_size), shuffle=bool(shuffle), seed=seed,
                          backend=backend, prefetch=prefetch, to_sample=to_sample,
                          profile=profile, name=label)
        if hasattr(dataset, "pna_deg"):  # update_config reads train_loader.dataset.pna_deg
            loader.dataset.pna_deg = dataset.pna_deg
        made.append(loader)
    _OPEN.append((tuple(made), world))
    return tuple(made)


def close_dataloaders() -> None:
    """Close every loader this module made, and their stores (collective, every rank)."""
    while _OPEN:
        made, world = _OPEN.pop()
        _loaders.close(made)
        world.close()
