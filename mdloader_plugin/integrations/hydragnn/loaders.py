"""The ``loader:`` switch: a registry of functions that build (train, val, test) loaders.

``mdloader`` puts each split in a :class:`~mdloader_plugin.store.shard.ShardStore` (every rank reads
its block of the file once; with ``mdloader.group_size`` its block of its replica group, ``auto``
chosen by the estimator on the train split and kept for the others) and serves batches with
:class:`~mdloader_plugin.loader.loader.MDLoader`; ``hydragnn`` is HydraGNN's own DataLoader path
(:mod:`.baseline`). Both take the same ``to_sample``, and MDLoader shuffles every split as
HydraGNN's ``create_dataloaders`` does (DistributedSampler, shuffle on, same seed): its sampler
deals the same order, so the two loaders feed the model the same batches and give the same losses.
Several files (``Dataset.path`` a list): one store over all of them
(:meth:`~mdloader_plugin.store.shard.ShardStore.from_files`), the train split sampled as
``mdloader.sampling`` says; the baseline is HydraGNN's loader over the concatenation of its
per-file datasets (:mod:`.baseline`), which proportional sampling matches batch for batch.
Adding a loader = adding one function here.
"""

from __future__ import annotations

from typing import Callable

from ...core.errors import ConfigError
from . import baseline

LABELS = ("trainset", "valset", "testset")


def build_mdloader(cfg: dict, world, to_sample: Callable, labels=LABELS):
    """Train/val/test MDLoaders over ``Dataset.path`` with the config's ``mdloader:`` options."""
    from ...loader.loader import MDLoader
    from ...loader.open import open_store
    from .graphs import split_path

    opts = cfg["mdloader"]
    batch_size = int(cfg["NeuralNetwork"]["Training"]["batch_size"])
    loaders, group_size = [], opts.get("group_size")
    device = trainer_device(opts.get("device"))
    for label in labels:
        store = open_store(world, split_path(cfg["Dataset"]["path"], label), label,
                           group_size=group_size,
                           batch_size=batch_size, backend=opts["backend"],
                           profile=opts.get("profile"),
                           max_memory_per_rank=opts.get("max_memory_per_rank"),
                           replicate=opts.get("replicate"), **_index_options(opts))
        group_size = store.group.size if store.group is not None else None  # auto: once
        loaders.append(MDLoader(store, batch_size=batch_size, shuffle=True,
                                batches=node_budget(cfg, world, label),
                                sampling=sampling(cfg) if label == "trainset" else None,
                                seed=int(opts["seed"]), drop_last=bool(opts["drop_last"]),
                                backend=opts["backend"], prefetch=int(opts["prefetch"]),
                                to_sample=to_sample, profile=opts.get("profile"),
                                name=label, order=opts.get("order", "auto"),
                                device=device, pin_memory=opts.get("pin_memory")))
    return tuple(loaders)


def node_budget(cfg: dict, world, label: str):
    """``NeuralNetwork.Training.Batching`` in ``node_budget`` mode (HydraGNN main): upstream's
    cost-aware batches over `label` (:mod:`mdloader_plugin.sampling.node_budget`), costs from
    the files' extents; None in ``fixed`` mode (collective where it reads nothing: the same
    answer on every rank)."""
    batching = cfg["NeuralNetwork"]["Training"].get("Batching")
    if not batching or batching.get("mode", "fixed") == "fixed":
        return None
    from ...sampling.node_budget import from_batching
    from ...mpi.world import agree
    from .graphs import node_counts, split_path

    def plan():
        import numpy as np

        path = split_path(cfg["Dataset"]["path"], label)
        costs = np.fromiter(node_counts(path, label), dtype=np.int64)
        return from_batching(batching, costs, 1 if world is None else world.size,
                             names=lambda i: f"graph {i} of {label}")

    return agree(world, plan)


def trainer_device(device):
    """``mdloader.device``: None (host batches), ``auto`` (HydraGNN's own training device when it
    is not the CPU, else None) or a torch device string, returned as given."""
    if device in (None, "none", "host"):
        return None
    if device == "auto":
        import torch

        if not torch.cuda.is_available():
            return None
        from . import compat

        return str(compat.get("get_device")())
    if str(device).startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(f"mdloader.device: {device!r} but this torch ({torch.__version__}) "
                              "sees no CUDA device; use `auto` (the GPU when there is one) or "
                              "leave it unset (host batches)")
    return str(device)


def _index_options(opts: dict) -> dict:
    """The store's ``index``/``index_share`` from the ``mdloader:`` options (defaults if unset)."""
    return {"index": opts.get("index") or "compact",
            "index_share": opts.get("index_share") or "rank"}


def sampling(cfg: dict):
    """``mdloader.sampling``, else ``weights`` when the data sets carry weights, else None."""
    path, chosen = cfg["Dataset"]["path"], cfg["mdloader"].get("sampling")
    if chosen is None and isinstance(path, list) and any(e.get("weight") is not None
                                                         for e in path):
        return {"type": "weights"}
    return chosen


def build_hydragnn(cfg: dict, world, to_sample: Callable, labels=LABELS):
    """Train/val/test loaders of HydraGNN's own kind (the baseline, ``loader: hydragnn``)."""
    return baseline.build_loaders(cfg, to_sample, labels)


BUILDERS: dict[str, Callable] = {"mdloader": build_mdloader, "hydragnn": build_hydragnn}


def build(cfg: dict, world, to_sample: Callable, labels=LABELS):
    """The loaders of the config's ``loader:`` (``mdloader`` or ``hydragnn``); an unknown name
    lists the choices."""
    try:
        make = BUILDERS[cfg["loader"]]
    except KeyError:
        raise ConfigError(f"loader: {cfg['loader']!r} is unknown; choose one of "
                          f"{', '.join(BUILDERS)}") from None
    return make(cfg, world, to_sample, labels)


def close(loaders) -> None:
    """Release loaders and their stores (collective for MDLoader: every rank, same order)."""
    for loader in loaders:
        if hasattr(loader, "close"):
            loader.close()
            if hasattr(loader, "store"):
                loader.store.close()
        else:
            for part in getattr(loader.dataset, "datasets", [loader.dataset]):
                if hasattr(part, "close"):
                    part.close()
