"""DDStore's ``DistDataset`` and ``create_dataloaders`` as MDLoader serves them, for upstream's
unmodified scripts under the launcher (:mod:`.launcher`).

:class:`DistDataset` takes upstream's arguments (``data, label, comm, ddstore_width, local``).
Collectively over `comm` it learns what every rank's `data` is (file, label, keys, subset,
targets, data set id: :meth:`.reader.AdiosDataset.describe`) and builds one MDLoader
store over the files, each rank reading its block once (no graph-by-graph copy as upstream's
``DistDataset`` makes). The data set the samplers see is upstream's: with ``local=True`` the
ranks' subsets joined in rank order, otherwise the one data set every rank passed
(:mod:`mdloader_plugin.sampling.mixes.chunks`). ``ddstore_width=W`` becomes replica groups of ``W``
ranks (:mod:`mdloader_plugin.mpi.groups`): each group holds the whole store, so a rank fetches only
inside its group. Upstream's DDStore with ``local=True`` and ``W`` below the ranks lets each group
sample only its own ranks' subsets; MDLoader's batches do not depend on ``W`` (they are
upstream's with one DDStore group), which costs ``N / W`` records a rank instead of about
``N / P``. ``ddstore.epoch_begin()/epoch_end()`` (upstream's fences around every batch) are
accepted and do nothing: MDLoader's fetches need no fence.

:func:`create_dataloaders` takes upstream's signature. When MDLoader serves (a dataset is a
:class:`DistDataset`, ``HYDRAGNN_USE_ddstore=1``, or ``MDLOADER_REPLACE=all``) it returns MDLoader
loaders (:class:`UpstreamLoader`) that deal what upstream's samplers deal: ``DistributedSampler``
with seed 0 and the given shuffle flags over the communicator of `group` (a torch sub-group, an
mpi4py communicator, or the world), or with ``oversampling=True`` ``num_samples[i]`` draws a rank
(:class:`~mdloader_plugin.sampling.mixes.chunks.ChunksMix`), or with ``batching`` in
``node_budget`` mode upstream's cost-aware batches (:mod:`mdloader_plugin.sampling.node_budget`).
Otherwise upstream's own function runs. ``HYDRAGNN_MAX_NUM_BATCH`` caps the steps MDLoader fetches
an epoch (upstream stops its loop there; the steps past it are never exchanged).

Every sample is made by upstream's own code path: the file's arrays as tensors, then
``update_predicted_values`` and ``update_atom_features`` from the dataset's ``var_config``, then
the ``dataset_name`` id upstream's dataset attaches (its ``dataset_name_dict``), so the model sees
the tensors upstream's loader gives it.
"""

from __future__ import annotations

import os

import numpy as np
import torch
from hydragnn.utils.datasets.abstractbasedataset import AbstractBaseDataset

from ....core.errors import ConfigError
from ....core.options import env
from ....mpi.agree import everywhere
from ....mpi.world import World, agree
from .. import compat
from ..loaders import LABELS
from . import reader

REPORT: dict = {}  # what was mapped, for the launcher's one log line


class _Fences:
    """``dataset.ddstore``: upstream's per-batch fences, accepted (MDLoader needs none)."""

    def epoch_begin(self) -> None:
        pass

    def epoch_end(self) -> None:
        pass

    def free(self) -> None:
        pass


class UpstreamSample:
    """A record -> upstream's ``Data``: tensors (dtypes kept), targets and input columns by
    upstream's functions, the ``dataset_name`` id of the record's file (None: none attached)."""

    def __init__(self, targets: dict | None, ids: list):
        self.targets, self.ids = targets, list(ids)

    def __call__(self, arrays):
        arrays = dict(arrays)
        tag = arrays.pop("dataset_name", None)
        data = reader.to_data(arrays)
        t = self.targets
        if t is not None:
            from hydragnn.preprocess import update_atom_features, update_predicted_values

            update_predicted_values(t["type"], t["output_index"], t["graph_feature_dims"],
                                    t["node_feature_dims"], data)
            update_atom_features(t["input_node_features"], data)
        ident = self.ids[0 if tag is None else int(np.asarray(tag).reshape(-1)[0])]
        if ident is not None:
            data.dataset_name = torch.tensor([[ident]])
        return data


class DistDataset(AbstractBaseDataset):
    """Upstream's ``DistDataset(data, label, comm, ddstore_width, local)`` over an MDLoader store
    (collective over `comm`; see the module docstring)."""

    def __init__(self, data, label, comm=None, ddstore_width=None, local=False, var_config=None,
                 ddstore_store_per_sample=True):
        super().__init__()
        from mpi4py import MPI

        self.label, self.local = label, bool(local)
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.world = World.detect(self.comm)
        self.ddstore, self.ddstore_width = _Fences(), ddstore_width
        mine = data.describe() if isinstance(data, reader.AdiosDataset) else None
        every = self.comm.allgather(mine)
        self.plan = agree(self.world, _plan, every, self.local, label, type(data).__name__)
        self.store = _open(self.world, self.plan, label, ddstore_width)
        starts = self.store.meta.get("dataset_starts", [0, self.store.num_samples])
        self.ids = np.concatenate([np.arange(starts[f] + lo, starts[f] + hi, dtype=np.int64)
                                   for f, lo, hi in self.plan["chunks"]])
        self.chunks = [(int(starts[f] + lo), int(starts[f] + hi))
                       for f, lo, hi in self.plan["chunks"]]
        self.to_sample = UpstreamSample(self.plan["targets"], self.plan["ids"])
        self._upstream_attributes(ddstore_width)
        self._files: dict = {}
        REPORT.setdefault("stores", []).append(
            (label, len(self.plan["files"]), self.comm.Get_size(), self.store.group))

    def _upstream_attributes(self, width) -> None:
        """What upstream's scripts read of a DistDataset besides the data: its replica group's
        communicator as upstream splits it (``ddstore_comm``: ranks ``rank // width``; the SC26
        scripts pass it as ``create_dataloaders(group=...)``), rank and sizes, ``total_ns``,
        ``keys`` and ``ddstore_width`` (the communicator's size when none was given)."""
        self.rank, self.comm_size = self.comm.Get_rank(), self.comm.Get_size()
        self.ddstore_width = int(width) if width is not None else self.comm_size
        self.ddstore_comm = self.comm.Split(self.rank // self.ddstore_width, self.rank)
        self.ddstore_comm_rank = self.ddstore_comm.Get_rank()
        self.ddstore_comm_size = self.ddstore_comm.Get_size()
        self.total_ns = int(self.ids.size)
        self.keys = sorted(self.plan["keys"])

    def len(self) -> int:
        return int(self.ids.size)

    def get(self, idx):
        """List entry `idx`, read from its file (no MPI: safe from any rank at any time)."""
        from ....sources.adios import GraphFile

        f, j = self._locate(idx)
        path = self.plan["files"][f]
        if path not in self._files:
            self._files[path] = GraphFile(path)
        arrays = self._files[path].read_block(self.label, j, j + 1, self.plan["keys"]).sample(0)
        if len(self.plan["files"]) > 1:
            arrays["dataset_name"] = np.full((1, 1), f, dtype=np.int64)
        return self.to_sample(arrays)

    def name_of(self, idx: int) -> str:
        """List entry `idx` as a person finds it: graph j of file F [label]."""
        f, j = self._locate(idx)
        return f"graph {j} of {self.plan['files'][f]} [{self.label}]"

    def _locate(self, idx) -> tuple[int, int]:
        """List entry `idx` as (file, graph in that file's label)."""
        gid = int(self.ids[int(idx)])
        starts = self.store.meta.get("dataset_starts", [0, self.store.num_samples])
        f = int(np.searchsorted(starts, gid, side="right") - 1)
        return f, gid - int(starts[f])

    def get_node_counts(self) -> np.ndarray:
        """Nodes of every list entry, from the files' extents (cost-aware batching)."""
        from ....sources.adios import GraphFile

        parts = []
        for path in self.plan["files"]:
            with GraphFile(path) as f:
                info = f.info(self.label)
                key = "x" if "x" in info.keys else "pos"
                parts.append(f.read_extents(self.label, key, 0, info.ndata)[0])
        return np.concatenate(parts)[self.ids]


def _plan(every: list, local: bool, label: str, kind: str) -> dict:
    """Files, keys, targets, ids and chunks ``(file, lo, hi)`` of the list every rank agrees on
    (pure: the same answer on every rank)."""
    if any(d is None for d in every):
        raise ConfigError(f"DistDataset({label}) over a {kind}: MDLoader serves DDStore for data "
                          "sets read from ADIOS2 files (AdiosDataset); run without --ddstore "
                          "(and without HYDRAGNN_USE_ddstore/MDLOADER_REPLACE) for other data sets")
    if not local:
        first = every[0]
        if any(d != first for d in every):
            raise ConfigError(f"DistDataset({label}, local=False): the ranks passed different "
                              "data sets; pass the same one everywhere, or local=True for "
                              "per-rank subsets")
        every = [first]
    files = list(dict.fromkeys(d["path"] for d in every))
    keys, targets = every[0]["keys"], every[0]["targets"]
    for d in every[1:]:
        if sorted(d["keys"]) != sorted(keys):
            raise ConfigError(f"--multi_model_list: {every[0]['path']} is read with keys "
                              f"{keys} but {d['path']} with {d['keys']}; read every file with "
                              "the same keys (upstream's setkeys) or give files with the same "
                              "keys")
        if d["targets"] != targets:
            raise ConfigError(f"DistDataset({label}): {d['path']} is read with another "
                              "var_config than {every[0]['path']}; use one var_config")
    ids = [next(d["id"] for d in every if d["path"] == p) for p in files]
    chunks = [(files.index(d["path"]), d["lo"], d["hi"]) for d in every]
    return {"files": files, "keys": keys, "targets": targets, "ids": ids, "chunks": chunks}


def _open(world, plan: dict, label: str, width):
    from ....loader.open import open_store

    agree(world, _check_width, width, world)  # --ddstore_width may differ by rank (MPMD)
    files = plan["files"]
    path = files[0] if len(files) == 1 else [
        {"path": p, "name": f"{i}:{os.path.basename(p.rstrip('/'))}"} for i, p in enumerate(files)]
    return open_store(world, path, label, group_size=width, keys=plan["keys"],
                      required=plan["keys"] if len(files) > 1 else ())


def _check_width(width, world) -> None:
    from ....mpi import groups

    if width is None:
        return
    valid = groups.valid_sizes(world.node_of)
    if isinstance(width, bool) or not isinstance(width, int) or width not in valid:
        raise ConfigError(f"--ddstore_width {width!r} does not divide the {world.size} ranks of "
                          f"the DDStore communicator into groups aligned with nodes; choose one "
                          f"of {', '.join(map(str, valid))}")


# -- create_dataloaders ---------------------------------------------------------------------------
def serves(datasets) -> bool:
    """Whether MDLoader serves this ``create_dataloaders`` call (see the module docstring)."""
    return (any(isinstance(d, DistDataset) for d in datasets)
            or os.getenv("HYDRAGNN_USE_ddstore", "0") not in ("", "0")
            or (env("MDLOADER_REPLACE") or "").lower() == "all")


def create_dataloaders(trainset, valset, testset, batch_size, train_sampler_shuffle=True,
                       val_sampler_shuffle=True, test_sampler_shuffle=True, group=None,
                       oversampling=False, num_samples=None, batching=None, *, _upstream=None):
    """Upstream's ``create_dataloaders``, served by MDLoader where it serves (collective)."""
    sets = (trainset, valset, testset)
    if not serves(sets):
        kw = {} if batching is None else {"batching": batching}
        return _upstream(trainset, valset, testset, batch_size, train_sampler_shuffle,
                         val_sampler_shuffle, test_sampler_shuffle, group=group,
                         oversampling=oversampling, num_samples=num_samples, **kw)
    group = _ddstore_group(group, sets)
    comm = compat.comm_of(group, next((d.comm for d in sets if isinstance(d, DistDataset)),
                                      None))
    node_budget = bool(batching) and batching.get("mode", "fixed") != "fixed"
    cap = everywhere(comm, _refused, node_budget, oversampling, num_samples)
    served = [s if isinstance(s, DistDataset) else
              DistDataset(s, label, comm, getattr(s, "ddstore_width", None), _is_local(s, comm))
              for s, label in zip(sets, LABELS)]
    for s, ds in zip(sets, served):
        for attr in ("pna_deg", "minmax_node_feature", "minmax_graph_feature"):
            if s is not ds and hasattr(s, attr) and not hasattr(ds, attr):
                setattr(ds, attr, getattr(s, attr))
    shuffles = (train_sampler_shuffle, val_sampler_shuffle, test_sampler_shuffle)
    members = _members(comm)
    everywhere(comm, _same_ranks, [ds.label for ds in served if _members(ds.comm) != members])
    loaders = []
    for i, (ds, shuffle) in enumerate(zip(served, shuffles)):
        k = int(num_samples[i]) if oversampling else None
        loaders.append(_loader(ds, int(batch_size), bool(shuffle), k, batching if node_budget
                               else None, cap))
    REPORT["loaders"] = {"batch_size": int(batch_size), "shuffle": shuffles,
                         "oversampling": [int(n) for n in num_samples] if oversampling else None,
                         "node_budget": dict(batching) if node_budget else None,
                         "group": comm.Get_size(), "world": _world_size(), "cap": cap,
                         "backend": loaders[0].loader.backend_name}
    return tuple(loaders)


def _refused(node_budget: bool, oversampling: bool, num_samples) -> "int | None":
    """The rank-local refusals of ``create_dataloaders`` and its ``HYDRAGNN_MAX_NUM_BATCH`` cap
    (run through :func:`~mdloader_plugin.mpi.agree.everywhere`: an error on any rank is one line
    on every rank, said by rank 0)."""
    if node_budget and oversampling:
        raise ConfigError("Training.Batching mode node_budget with --oversampling: upstream "
                          "refuses the pair too; drop --oversampling or use mode: fixed")
    if oversampling and (num_samples is None or len(num_samples) < 3):
        raise ConfigError("create_dataloaders(oversampling=True) needs num_samples for train, "
                          "val and test (upstream's --oversampling sets them)")
    return compat.max_batches()


def _same_ranks(labels: list) -> None:
    """`labels`: the DistDatasets whose communicator spans other ranks than the loaders' group
    (on this rank); run through ``everywhere`` (one line on every rank)."""
    if labels:
        raise ConfigError(f"create_dataloaders(group=...) spans other ranks than the "
                          f"DistDataset({labels[0]}) communicator; with --task_parallel pass the "
                          "branch's group for both (upstream's multibranch script does)")


def _loader(ds: DistDataset, batch_size: int, shuffle: bool, oversample: int | None, batching,
            cap):
    from ....loader.loader import MDLoader

    spec = {"type": "chunks", "chunks": ds.chunks}
    if oversample is not None:
        spec["oversampling"] = oversample
    kw = {}
    if batching is not None:
        from ....sampling.node_budget import from_batching

        kw["batches"] = agree(ds.world, from_batching, batching, ds.get_node_counts(),
                              ds.comm.Get_size(), ids=ds.ids, shuffle=shuffle, names=ds.name_of)
    loader = MDLoader(ds.store, batch_size=batch_size, shuffle=shuffle, seed=0,
                      sampling=spec, to_sample=ds.to_sample, name=ds.label,
                      backend=env("MDLOADER_BACKEND"), max_steps=cap,
                      profile=None, **kw)  # None: $MDLOADER_PROFILE, else local
    return UpstreamLoader(loader, ds)


class UpstreamLoader:
    """An MDLoader as upstream's ``train_validate_test`` uses a DataLoader: ``len`` (the same on
    every rank), ``sampler``/``batch_sampler`` with ``set_epoch``, ``dataset`` (upstream's
    ``DistDataset`` stand-in: ``ddstore`` fences, ``pna_deg``, ``dataset[0]``); every ``iter()``
    starts the epoch from its first batch, as a fresh DataLoader iterator does (upstream's
    ``update_config`` and its ``HYDRAGNN_MAX_NUM_BATCH`` stop iterating early)."""

    def __init__(self, loader, dataset):
        self.loader, self.dataset = loader, dataset
        self.sampler = self.batch_sampler = loader.sampler

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        self.loader.rewind()
        return iter(self.loader)

    def __getattr__(self, name):
        return getattr(self.__dict__["loader"], name)


def _world_size() -> int:
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_size()


def _members(comm) -> tuple:
    from mpi4py import MPI

    return tuple(comm.allgather(MPI.COMM_WORLD.Get_rank()))


def _ddstore_group(group, sets):
    """``group=trainset.ddstore_comm`` (upstream's SC26 scripts with ``--ddstore_width``): upstream
    then samples each replica group's own ranks' graphs over that group; MDLoader's replica groups
    each hold the whole store, so the epoch is dealt over the DistDataset's whole communicator
    instead (each graph once an epoch, the same number of batches a rank)."""
    for d in sets:
        if isinstance(d, DistDataset) and group is not None and group is d.ddstore_comm:
            REPORT["ddstore_group"] = (d.ddstore_comm_size, d.comm_size)
            return d.comm
    return group


def _is_local(dataset, comm) -> bool:
    """A plain dataset handed to MDLoader: per-rank subsets (joined, as ``local=True``) unless
    every rank passed the same one."""
    mine = dataset.describe() if isinstance(dataset, reader.AdiosDataset) else None
    every = comm.allgather(mine)
    return any(d != every[0] for d in every)
