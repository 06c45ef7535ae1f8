"""``loader: mdloader`` for fairchem: an MDLoader that looks like fairchem's train DataLoader.

``build_loader`` is the Hydra ``_target_`` of the ``loader`` group (``conf/loader/mdloader.yaml``
beside this module, on Hydra's search path through MDLoader's plugin). It loads one label of an
ADIOS2 file into a :class:`~mdloader_plugin.store.shard.ShardStore` (each rank reads its own
block once), and returns :class:`FairchemMDLoader`, which yields ``AtomicData`` batches
built by :class:`~.data.ToAtomicData` and collated by the ``collate_fn`` of the config (fairchem's
own ``MTCollater`` via ``mt_collater_adapter``), i.e. the same batch objects fairchem's DataLoader
would give. The wrapper adds what fairchem's ``MLIPTrainEvalUnit`` calls on a loader:
``batch_sampler.set_epoch_and_start_iteration`` (epoch and mid-epoch resume), ``len``, and
``epoch_stats`` for the epoch-time callback.

Batch sizes. fairchem users size batches by atoms (``max_atoms``, its
``MaxAtomDistributedBatchSampler``), MDLoader's core sampler by graphs. With ``max_atoms`` set the
loader serves fairchem's own batches (:class:`~mdloader_plugin.sampling.max_atoms.MaxAtomsBatches`):
packed once from a seeded permutation, never above ``max_atoms`` atoms (a larger graph is left
out, as fairchem does), their order shuffled each epoch and dealt round robin; batches differ in
graph count, every rank runs the same number of steps. Without it, ``batch_size`` graphs a rank a
step, and ``balance: atoms`` re-deals each step's graphs so every rank's batch has about the same
number of atoms (greedy, largest first). Cost: an ``Allgatherv`` of one int32 a sample at
start-up (kept: 4 B a sample, ``balance_weights`` in ``memory_report()``).

Resume: fairchem restores only ``(epoch, start_iter)``; the requeue callback
(:mod:`.requeue`) also saves the loader's ``state_dict()`` with each checkpoint and stages it
back, which continues the epoch exactly on any world size or batch size. The epoch and
``start_iter`` fairchem sets apply at the next ``iter()``, after the callback had its say.

Several data sets (``datasets: {name: path | {path, key_mapping, transforms, no_shuffle}}``
instead of ``path``): one store over all files
(:meth:`~mdloader_plugin.store.shard.ShardStore.from_files`; ``group_size: auto`` sized over all of
them), data sets in name order as fairchem's ``create_concat_dataset`` orders them, each sample
converted with its own data set's name, key mapping and transforms (``data.dataset`` routes it to
the tasks listing that name), ``no_shuffle: true`` keeping that data set in file order as
fairchem's split option does, and ``sampling`` = fairchem's ``combined_dataset_config.sampling``
(``{type: temperature, temperature: 2}``, ...) expanded with fairchem's arithmetic
(:mod:`mdloader_plugin.sampling.mixes.fairchem`).

All loaders built in a process are closed (a collective) at exit, in creation order, before
mpi4py finalises MPI.
"""

from __future__ import annotations

import atexit
from typing import Any, Callable, Mapping

import numpy as np

from ...core.errors import ConfigError

_WORLD = None
_OPEN: list = []


def _world():
    global _WORLD
    if _WORLD is None:
        from ...mpi.world import World

        _WORLD = World.detect()
        atexit.register(close_all)
    return _WORLD


def close_all() -> None:
    """Close every loader built in this process, in creation order (collective)."""
    while _OPEN:
        _OPEN.pop(0).close()


class _BatchSampler:
    """What ``fairchem.units.mlip_unit.set_sampler_state`` calls: the epoch and fairchem's
    ``start_iter`` wait until the next ``iter()``, so that a loader state read from the
    checkpoint (:mod:`.requeue`, staged after fairchem's own call) takes their place."""

    def __init__(self, owner):
        self._owner = owner

    def set_epoch_and_start_iteration(self, epoch: int, start_iter: int) -> None:
        self._owner._pending = (int(epoch), int(start_iter))

    def __len__(self) -> int:
        return len(self._owner.loader)


class _Dataset:
    """``loader.dataset``: this rank's samples, plus the ``dataset_names`` (``oc20.val``) that
    fairchem's eval unit reads to set up its per-dataset metrics."""

    def __init__(self, samples, names: list[str]):
        self._samples, self.dataset_names = samples, names

    def __len__(self) -> int:
        return len(self._samples)

    def __getitem__(self, i: int):
        return self._samples[i]


class FairchemMDLoader:
    """An :class:`~mdloader_plugin.loader.loader.MDLoader` with the surface fairchem's trainer
    uses."""

    def __init__(self, loader, dataset_names: list[str]):
        self.loader = loader
        self.batch_sampler = _BatchSampler(self)
        self.dataset = _Dataset(loader.dataset, dataset_names)
        self._pending: tuple[int, int] | None = None  # fairchem's (epoch, start_iter)
        self._staged: tuple[dict, str] | None = None  # a loader state and its file

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        self._apply()
        return iter(self.loader)

    def stage_state(self, state: dict, source: str = "loader state") -> None:
        """Resume from `state` (a ``state_dict()`` saved with the checkpoint, read from file
        `source`) at the next ``iter()``, instead of fairchem's ``start_iter``. Both must name
        the same point: a state whose epoch and step differ from fairchem's own progress is
        from another checkpoint, an error naming both (never silently preferred)."""
        self._staged = (dict(state), source)

    def _apply(self) -> None:
        pending, staged, ld = self._pending, self._staged, self.loader
        self._pending = self._staged = None
        if staged is not None:
            state, source = staged
            if pending is not None and _position(state) != tuple(pending):
                raise ConfigError(
                    f"{source}: written at epoch {_position(state)[0]} step "
                    f"{_position(state)[1]} but fairchem's checkpoint resumes at epoch "
                    f"{pending[0]} step {pending[1]}: the file is not from this checkpoint; "
                    "remove it to resume from fairchem's step count alone, or resume from "
                    "the checkpoint it was saved with")
            ld.load_state_dict(state, source)
        elif pending is not None and pending[1]:
            from ...loader.args import state_identity

            if ld.rank == 0:
                ld.log.warning(f"[{ld.name}] resuming at fairchem's step {pending[1]} of epoch "
                               f"{pending[0]} without MDLoader's state in the checkpoint: exact "
                               "only on the same ranks and batch size (add the requeue "
                               "LoaderStateCallback to runner.callbacks)")
            ld.load_state_dict({"seed": ld.schedule.seed, "epoch": pending[0],
                                "step": pending[1], **state_identity(ld.schedule, ld.store)})
        elif pending is not None:
            ld.set_epoch(pending[0])
            ld.rewind()

    @property
    def epoch_stats(self) -> dict:
        return self.loader.epoch_stats.as_dict()

    @property
    def backend_name(self) -> str:
        return self.loader.backend_name

    def close(self) -> None:
        self.loader.close()


def _position(state: dict) -> tuple:
    """(epoch, step) of a staged loader state, as written (the ints fairchem's progress has)."""
    try:
        return int(state["epoch"]), int(state["step"])
    except (KeyError, TypeError, ValueError):
        return state.get("epoch"), state.get("step")


def local_natoms(store) -> np.ndarray:
    """Atoms of each of this rank's samples (from the stored ``pos`` shapes, no copy)."""
    from ...records import codec

    lo, hi = store.local_range
    return np.array([codec.decode(store.local_record(i))["pos"].shape[0] for i in range(lo, hi)],
                    dtype=np.int32)


def global_natoms(store, world) -> np.ndarray:
    """Atoms of every sample, in global id order, on every rank (int32, 4 B a sample; an
    ``Allgatherv`` in the rank's replica group, which holds every sample, in calls of at most
    ``MDLOADER_MPI_MAX_COUNT`` elements and bytes: never a pickled collective)."""
    from ...store.index_build import allgather_blocks

    return allgather_blocks(store.group, local_natoms(store), store.num_samples)


def build_loader(path: str | None = None, collate_fn: Callable | None = None,
                 label: str = "trainset", split: str = "train",
                 dataset_name: str = "oc20", key_mapping: Mapping[str, Any] | None = None,
                 transforms: Mapping[str, Any] | None = None, max_atoms: int | None = None,
                 batch_size: int | None = None, balance: str | None = None, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False, backend: str = "auto",
                 prefetch: int = 2, profile: str | None = None,
                 max_memory_per_rank: int | str | None = None, group_size=None,
                 width=None, datasets: Mapping[str, Any] | None = None,
                 sampling: Mapping[str, Any] | None = None, order: str = "auto",
                 index: str = "compact", index_share: str = "rank",
                 replicate: str | None = None) -> FairchemMDLoader:
    """Hydra target: MDLoader over ``path[label]`` (or several `datasets`) serving fairchem
    ``AtomicData`` batches.

    Args:
        path: the ADIOS2 file in HydraGNN's layout (``mdloader convert`` writes one).
        collate_fn: list of ``AtomicData`` -> batch (fairchem's ``mt_collater_adapter``).
        label: the split inside the file (``trainset``, ``valset``, ``testset``).
        split: fairchem's name of the split (``train``, ``val``), used in dataset names.
        dataset_name: fairchem's dataset name (``oc20``); batches are tagged with it.
        key_mapping: file key -> fairchem key (``energy: oc20_energy``).
        transforms: fairchem's per-sample transforms (``common_transform`` ...).
        max_atoms: the atom cap of a batch: fairchem's ``MaxAtomDistributedBatchSampler``'s
            batches, rank by rank (graphs above the cap are left out, as fairchem does).
        batch_size: graphs a batch when ``max_atoms`` is not set.
        balance: with ``batch_size``: ``atoms`` deals each step's graphs so every rank gets
            about the same number of atoms; ``none`` (default): DistributedSampler's dealing.
        shuffle: as ``DistributedSampler``.
        seed: as ``DistributedSampler``.
        drop_last: as ``DistributedSampler``.
        backend: ``auto``, ``onesided`` or ``collective``.
        prefetch: batches prepared ahead by the producer thread.
        profile: machine profile for ``backend: auto`` (name or ``mdloader calibrate`` output).
        max_memory_per_rank: stop before loading if a rank's store would be larger (bytes or
            ``"4GiB"``).
        group_size: replica groups (``auto``, a number of ranks, or None: all ranks); ``auto``
            needs ``batch_size``. See ``docs/replica-groups.md``.
        width: DDStore's name for ``group_size``.
        replicate: how replica groups get their copies: ``read`` (every group reads the
            file), ``copy`` (read once, copied across groups over MPI) or ``auto``/None (the
            default, :mod:`mdloader_plugin.store.replicate`).
        datasets: several data sets instead of `path`: ``{name: path}`` or ``{name: {path,
            key_mapping, transforms, no_shuffle}}`` (one store; names sorted as fairchem sorts
            them; ``no_shuffle: true`` keeps that data set in file order, as fairchem's split
            option).
        sampling: with `datasets`, fairchem's ``combined_dataset_config.sampling``
            (``{type: temperature, temperature: 2}``); default temperature 1 (every sample once).
        order: the epoch permutation: ``auto`` (torch up to 4,194,304 samples, feistel above),
            ``torch`` (DistributedSampler's) or ``feistel`` (no list of N ids; with `datasets`,
            each data set's fixed permutation keyed too); see ``docs/scale.md``. Not with
            ``max_atoms`` (its batches are packed from one list).
        index: the global index: ``compact`` (about 1-2 bytes a sample) or ``full`` (16).
        index_share: ``rank`` (a copy a rank) or ``node`` (one copy a node in shared memory).
    """
    from ...mpi.groups import from_options
    from ...mpi.world import agree
    from ...loader.loader import MDLoader
    from ...core.log import get_logger
    from ...core.options import check_scale
    from ...loader.open import open_store
    from .data import ToAtomicData

    if collate_fn is None:
        raise ConfigError("the loader needs collate_fn (fairchem's mt_collater_adapter)")

    if max_atoms is None and not batch_size:
        raise ConfigError("set max_atoms (atoms a batch) or loader.batch_size (graphs a batch)")
    balance = balance or "none"
    if balance not in ("atoms", "none"):
        raise ConfigError(f"loader balance: {balance!r} is unknown; choose atoms or none")
    if max_atoms and balance == "atoms":
        raise ConfigError("loader balance: atoms deals a batch_size of graphs by atoms; with "
                          "max_atoms every batch is capped by atoms already: remove balance")
    scale = check_scale({"order": order, "index": index, "index_share": index_share},
                        lambda key: f"loader.{key}")
    if max_atoms and order == "feistel":
        raise ConfigError("loader.order: feistel orders batch_size batches; max_atoms packs "
                          "fairchem's batches once from one permutation (docs/fairchem.md): "
                          "set order: auto, or max_atoms: null and a batch_size")
    index_kw = {"index": scale["index"], "index_share": scale["index_share"]}
    world = _world()
    group_size = from_options({"group_size": group_size, "width": width}, "loader")
    if group_size == "auto" and not batch_size:
        raise ConfigError("loader.group_size auto needs loader.batch_size (graphs a batch) to "
                          "weigh the backends; or set group_size to a number of ranks")
    if datasets:
        store, to_sample, names, no_shuffle = _multi_store(
            world, datasets, label, split, key_mapping, transforms, max_memory_per_rank,
            dict(group_size=group_size, batch_size=batch_size, backend=backend, profile=profile,
                 replicate=replicate, **index_kw))
    elif path:
        store = open_store(world, path, label, group_size=group_size, batch_size=batch_size,
                           backend=backend, profile=profile,
                           max_memory_per_rank=max_memory_per_rank, replicate=replicate,
                           **index_kw)
        to_sample = ToAtomicData(dataset_name, key_mapping, transforms, split)
        names = [dataset_name]
    else:
        raise ConfigError("set the loader's path (one file) or datasets ({name: path, ...})")
    natoms = global_natoms(store, world) if (max_atoms or balance == "atoms") else None
    mix = _sampling(sampling, split, no_shuffle) if datasets else None
    plan = None
    if max_atoms:
        plan = agree(world, atom_capped_plan, natoms, max_atoms, store, mix, world.size,
                     shuffle=shuffle, seed=int(seed), drop_last=drop_last)
        batch_size = max(1, round(plan.flat.size / max(1, plan.num_entries)))
        _log_plan(get_logger(world.rank), label, plan)
    loader = MDLoader(store, batch_size=int(batch_size), shuffle=shuffle, seed=int(seed),
                      drop_last=drop_last, backend=backend, prefetch=int(prefetch),
                      to_sample=to_sample, collate=collate_fn, profile=profile, name=label,
                      balance_weights=natoms if balance == "atoms" else None,
                      sampling=mix, order=scale["order"], batches=plan)
    _OPEN.append(loader)
    return FairchemMDLoader(loader, [f"{n}.{split}" for n in names])


def atom_capped_plan(natoms, max_atoms: int, store, mix, world_size: int, **kw):
    """fairchem's ``MaxAtomDistributedBatchSampler`` batches
    (:class:`~mdloader_plugin.sampling.max_atoms.MaxAtomsBatches`) over the store, or over the
    expanded list of a data-set `mix` (as fairchem's sampler packs its ``ConcatDataset``)."""
    from ...sampling.max_atoms import MaxAtomsBatches
    from ...sampling.mixes import DataSets, get_mix

    if mix is None:
        return MaxAtomsBatches(natoms, int(max_atoms), world_size, **kw)
    try:
        ids = get_mix(mix, DataSets.of_store(store), world_size).expanded()
    except ValueError as exc:
        raise ConfigError(f"loader sampling: {exc}") from None
    return MaxAtomsBatches(natoms[ids], int(max_atoms), world_size, ids=ids, **kw)


def _log_plan(log, label: str, plan) -> None:
    atoms = plan.batch_atoms()
    log.info(f"[{label}] max_atoms={plan.max_nodes}: {plan.num_entries} batches of at most "
             f"{plan.max_nodes} atoms (mean {atoms.mean():.1f} atoms, "
             f"{plan.flat.size / plan.num_entries:.1f} graphs a batch), "
             f"{plan.steps_in(0)} steps an epoch")
    if plan.skipped:
        log.warning(f"[{label}] {plan.skipped} graphs have more than max_atoms="
                    f"{plan.max_nodes} atoms and are left out, as fairchem's sampler does; "
                    "raise max_atoms to train on them")


def _sampling(sampling: Mapping[str, Any] | None, split: str, no_shuffle=()) -> dict:
    """fairchem's ``combined_dataset_config.sampling`` plus the per-data-set permutation its
    ``create_dataset`` applies (seed 0 for train, 1 for other splits), which the data sets named
    in `no_shuffle` skip (their split's ``no_shuffle``)."""
    spec = dict(sampling or {"type": "temperature", "temperature": 1.0})
    spec.setdefault("dataset_seed", 0 if split == "train" else 1)
    if no_shuffle:
        spec["no_shuffle"] = list(no_shuffle)
    return spec


def _multi_store(world, datasets: Mapping[str, Any], label, split, key_mapping, transforms,
                 max_memory_per_rank, placement: Mapping[str, Any]):
    """One store over several files (name order, as fairchem's create_concat_dataset) and the
    per-data-set AtomicData conversion, and the names of the data sets that keep their file order
    (``no_shuffle``). `placement`: :func:`~mdloader_plugin.loader.open.open_store`'s group_size
    (``auto`` too), batch_size, backend, profile, replicate, index, index_share."""
    from ...loader.open import open_store
    from ...sources.multi import DatasetSpec
    from .data import REQUIRED, ToAtomicDataByDataset

    names = sorted(datasets)
    entries = [datasets[n] if isinstance(datasets[n], Mapping) else {"path": datasets[n]}
               for n in names]
    for n, e in zip(names, entries):
        if "path" not in e:
            raise ConfigError(f"loader datasets.{n}: give a path (or {{path, key_mapping, "
                              "transforms, no_shuffle}})")
        unknown = sorted(set(e) - {"path", "key_mapping", "transforms", "no_shuffle"})
        if unknown:
            raise ConfigError(f"loader datasets.{n}: unknown key {unknown[0]!r} (keys: path, "
                              "key_mapping, transforms, no_shuffle)")
    specs = [DatasetSpec(str(e["path"]), n) for n, e in zip(names, entries)]
    store = open_store(world, specs, label, required=REQUIRED,
                       max_memory_per_rank=max_memory_per_rank, **placement)
    to_sample = ToAtomicDataByDataset(
        [(n, e.get("key_mapping", key_mapping), e.get("transforms", transforms))
         for n, e in zip(names, entries)], split)
    return store, to_sample, names, [n for n, e in zip(names, entries) if e.get("no_shuffle")]
