"""MDLoader's arguments checked before any collective (a bad one is one ``ConfigError`` line
naming the argument, its value and what it must be), and the schedule they make."""

from __future__ import annotations

import numpy as np

from ..backends import get_backend
from ..core.errors import ConfigError
from ..core.options import env
from ..sampling.schedule import ResumeState, Schedule, resume_position
from ..estimator.profile import get_profile
from ..mpi.agree import agree_settings, job_settings
from ..sampling.mixes import DataSets, get_mix
from ..store.load import data_identity
from .watchdog import fetch_timeout

IDENTITY = ("num_samples", "data", "shuffle", "drop_last")  # what a loader state is valid for


def producer_kind(producer: str | None) -> tuple[str, str | None]:
    """The producer (always the thread now) and, for the removed ``"process"``, the one-line
    deprecation warning to log."""
    src = "producer"
    if producer is None:
        src, producer = "MDLOADER_PRODUCER", env("MDLOADER_PRODUCER")
    if producer not in ("thread", "process"):
        raise ConfigError(f"{src} must be 'thread' (or the deprecated 'process'), got "
                          f"{producer!r}")
    if producer == "process":
        return "thread", (f"{src}='process' is deprecated and ignored: the producer thread "
                          "builds batches with the GIL released (docs/gil-free-batches.md), "
                          "which measured faster than the helper process; remove the setting")
    return "thread", None


def online_trial_setting(online_trial: bool, online_check: bool | None) -> tuple[bool, str | None]:
    """Whether ``auto`` runs its online trial and, for the old keyword ``online_check`` (its name
    before "check" came to mean ``mdloader check`` alone), the one-line deprecation warning."""
    if online_check is None:
        return bool(online_trial), None
    if not online_trial and online_check:  # online_trial given (its default is True), and apart
        raise ConfigError("online_trial=False and online_check=True disagree: give online_trial "
                          "alone (online_check is its deprecated old name)")
    return bool(online_check), (f"online_check={online_check!r} is deprecated: it is now "
                                f"online_trial={online_check!r} (same behaviour)")


def producer_and_trial(producer: str | None, online_trial: bool,
                       online_check: bool | None) -> tuple[str, bool, list[str]]:
    """The producer (:func:`producer_kind`), whether ``auto`` runs its online trial
    (:func:`online_trial_setting`) and the deprecation lines to log for their old spellings."""
    kind, removed = producer_kind(producer)
    trial, renamed = online_trial_setting(online_trial, online_check)
    return kind, trial, [note for note in (removed, renamed) if note]


def prefetch_bytes(mib: float | None) -> int:
    """The prefetch queue's cap in bytes (`mib`, else ``MDLOADER_PREFETCH_MIB``; must be > 0)."""
    src = "prefetch_mib"
    if mib is None:
        src, mib = "MDLOADER_PREFETCH_MIB", env("MDLOADER_PREFETCH_MIB")
    try:
        value = float(mib)
    except (TypeError, ValueError):
        value = float("nan")
    if not value > 0:
        raise ConfigError(f"{src} must be a number of MiB > 0, got {mib!r}")
    return int(value * 2**20)


def agreed_schedule(world, store, size: int, batch_size, prefetch, backend: str, profile,
                    prefetch_mib, max_steps, sampling, **kw) -> Schedule:
    """Collective: the first of MDLoader's construction. Its schedule (:func:`checked_schedule`,
    with ``MDLOADER_FETCH_TIMEOUT`` and `max_steps` checked too) and, in the same ONE reduction
    (:func:`~mdloader_plugin.mpi.agree.agree_settings`), every setting that steers a collective
    (:func:`loader_settings`) agreed: ranks that differ stop with one line naming the setting
    and the ranks, exit 2 on every rank; a check failing on any rank is raised on every rank."""
    settings = loader_settings(batch_size, kw["shuffle"], kw["seed"], kw["drop_last"],
                               kw["order"], prefetch, kw["weights"], sampling, kw["batches"],
                               max_steps)
    return agree_settings(world, settings, checked_loader, max_steps, store.num_samples, size,
                          batch_size, prefetch, backend, profile, prefetch_mib,
                          mix=(sampling, store), **kw)


def loader_settings(batch_size, shuffle, seed, drop_last, order, prefetch, weights, sampling,
                    batches, max_steps) -> dict:
    """What every rank's loader must share, as comparable text (``mpi.agree.agree_settings``):
    the schedule's arguments (which samples a rank fetches at which step, and how many steps),
    ``prefetch`` (how many next-epoch steps every rank's producer runs ahead) and the job
    settings that steer collectives (:func:`~mdloader_plugin.mpi.agree.job_settings`). Never
    raises, and the same names on every rank (whatever a rank was given: the reduction that
    compares them must match)."""
    return {"batch_size": _text(batch_size), "shuffle": str(bool(shuffle)), "seed": _text(seed),
            "drop_last": str(bool(drop_last)), "order": _text(order), "prefetch": _text(prefetch),
            "balance_weights": _array_text(weights), "sampling": _mapping_text(sampling),
            "batches": _table_text(batches), "max_steps": _text(max_steps), **job_settings()}


def checked_loader(max_steps, *args, **kw) -> Schedule:
    """:func:`checked_schedule`, with ``MDLOADER_FETCH_TIMEOUT`` and `max_steps` checked too
    (every rank-local check of the loader, before its first collective)."""
    fetch_timeout()
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(
            max_steps, (int, np.integer)) or max_steps < 0):
        raise ConfigError(f"max_steps must be an integer >= 0 or None, got {max_steps!r}")
    return checked_schedule(*args, **kw)


def _text(value) -> str:
    """`value` as text alike for equal values (``0`` and ``np.int64(0)``)."""
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        value = value.item()
    return str(value)


def _array_text(arr) -> str:
    """An array by its size, dtype and digest (its bytes, not its repr)."""
    if arr is None:
        return "None"
    import hashlib

    try:
        a = np.ascontiguousarray(arr)
        dig = hashlib.blake2b(a.view(np.uint8).reshape(-1), digest_size=8).hexdigest()
    except (TypeError, ValueError):  # not numbers (its own error follows): as written
        return _text(arr)[:200]
    return f"{a.size} {a.dtype} values (digest {dig})"


def _mapping_text(value) -> str:
    """A sampling spec (a name, ``TYPE:k=v``, or a mapping) as canonical text."""
    if isinstance(value, dict):
        import json

        try:
            return json.dumps(value, sort_keys=True, default=str)
        except (TypeError, ValueError):  # keys that do not sort: as written
            pass
    return _text(value)


def _table_text(batches) -> str:
    """A batch table by its class, its parameters and its per-sample costs' digest."""
    if batches is None:
        return "None"
    attrs = {k: _text(getattr(batches, k)) for k in (
        "world_size", "num_samples", "max_nodes", "max_graphs", "shuffle", "seed", "drop_last")
        if hasattr(batches, k)}
    for k in ("costs", "ids"):
        if getattr(batches, k, None) is not None:
            attrs[k] = _array_text(getattr(batches, k))
    return f"{type(batches).__name__}{attrs}"


def checked_schedule(num_samples: int, size: int, batch_size, prefetch, backend: str, profile,
                     prefetch_mib, **kw) -> Schedule:
    """MDLoader's arguments checked (a bad one is a ConfigError) and its schedule."""
    prefetch_bytes(prefetch_mib)
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size <= 0:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
    if isinstance(prefetch, bool) or not isinstance(prefetch, (int, np.integer)) or prefetch < 0:
        raise ConfigError(f"prefetch must be an integer >= 0, got {prefetch!r}")
    if backend != "auto":
        try:
            get_backend(backend)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    else:
        get_profile(profile)  # a missing or absurd profile fails here, before any collective
    batches = kw.pop("batches", None)
    if batches is not None:  # a batch table replaces the schedule (e.g. node_budget batches)
        if batches.world_size != size:
            raise ConfigError(f"the batch table was made for {batches.world_size} ranks, the "
                              f"loader has {size}: make it with the job's world size")
        return batches
    try:
        kw["mix"] = _mix(*kw["mix"], size)
        return Schedule(num_samples, size, int(batch_size), **kw)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _mix(sampling, store, size: int):
    """The store's data-set mix for `sampling` (None: plain single-order epochs)."""
    if sampling is None and "dataset_starts" not in store.meta:
        return None
    mix = get_mix(sampling, DataSets.of_store(store), size)
    return None if mix.name == "proportional" else mix


def checked_state(state: dict, core: Schedule, size: int) -> ResumeState:
    """A saved loader state that this loader (schedule `core`, `size` ranks) can resume."""
    try:
        st = ResumeState.from_dict(state)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if st.seed != core.seed:
        raise ConfigError(f"loader state has seed {st.seed} but this loader uses seed "
                          f"{core.seed}; resume with the same seed")
    if st.order and st.order != core.order:
        raise ConfigError(f"loader state was saved with order {st.order!r} but this loader "
                          f"uses {core.order!r}; resume with order={st.order!r}")
    if st.offset > core.num_samples:
        raise ConfigError(f"loader state offset {st.offset} exceeds the data set's "
                          f"{core.num_samples} samples; is it from another data set?")
    mix = core.mix
    if mix is not None and mix.world_size is not None and st.world_size not in (0, size):
        raise ConfigError(f"loader state is from {st.world_size} ranks but sampling "
                          f"{mix.name!r} splits the data sets by rank count; resume on "
                          f"{st.world_size} ranks")
    return st


def state_of(loader) -> dict:
    """`loader`'s ``state_dict()``: where it stands (:class:`ResumeState`) and what for."""
    core = loader.schedule
    return dict(ResumeState(core.seed, loader.epoch, loader._step, loader.size,
                            loader.batch_size, core.offset_of(loader.epoch), core.order).to_dict(),
                **state_identity(core, loader.store))


def check_state(loader, state, source: str = "loader state") -> ResumeState:
    """`state` checked against `loader` (:func:`checked_identity`, then :func:`checked_state`);
    nothing changes. `source` names the state (its file) in the error."""
    checked_identity(state, state_identity(loader.schedule, loader.store), source)
    return checked_state(state, loader.schedule, loader.size)


def state_identity(core, store) -> dict:
    """What a loader state of schedule `core` over `store` is valid for: the epoch's length,
    the data (each file's path and bytes and the label, ``""`` for a store built in memory),
    shuffle and drop_last. The files are looked at once a store (kept in its ``meta``)."""
    meta = store.meta
    if "identity" not in meta:
        paths = meta.get("path")
        meta["identity"] = "" if paths is None else data_identity(
            paths if isinstance(paths, (list, tuple)) else [paths], meta.get("label"))
    return {"num_samples": int(core.num_samples), "data": meta["identity"],
            "shuffle": bool(getattr(core, "shuffle", True)),
            "drop_last": bool(getattr(core, "drop_last", False))}


def checked_identity(state, mine: dict, source: str) -> None:
    """A loader state written for another data set (sample count, files) or another
    shuffle/drop_last is one ConfigError naming `source` (the state file), both sides and
    what to do; so is a state without these entries (written by hand or an older MDLoader)."""
    missing = [k for k in IDENTITY if not isinstance(state, dict) or k not in state]
    if missing:
        raise ConfigError(f"{source}: written without {', '.join(missing)} (by hand or by an "
                          f"older MDLoader) but this run has {_described(mine, IDENTITY)}: "
                          "start without that state (a new run), or save one with this "
                          "MDLoader's state_dict()")
    differ = [k for k in IDENTITY if _norm(k, state[k]) != mine[k]]
    if differ:
        keys = ["data"] + differ if differ == ["num_samples"] else differ
        raise ConfigError(f"{source}: written for {_described(state, keys)} but this run has "
                          f"{_described(mine, keys)}: continue with the data set, shuffle and "
                          "drop_last it was written with, or start a new run without it")


def _norm(key: str, value):
    try:
        return {"num_samples": int, "data": str}.get(key, bool)(value)
    except (TypeError, ValueError):
        return value


def _described(d: dict, keys) -> str:
    parts = []
    if "num_samples" in keys or "data" in keys:
        parts.append(f"a data set of {d.get('num_samples')} samples"
                     + (f" ({d['data']})" if d.get("data") else " (built in memory)"))
    parts += [f"{k}={d.get(k)}" for k in ("shuffle", "drop_last") if k in keys]
    return ", ".join(parts)


def resume_offset(st: ResumeState, core, size: int, batch_size: int) -> tuple[int, int]:
    """``(offset, step)`` continuing `st` on `size` ranks: over samples, or over the batches of a
    batch table counting its epoch in whole batches (``num_entries``: fairchem's max_atoms)."""
    entries = getattr(core, "num_entries", None)
    if entries is None:
        return resume_position(st, core.num_samples, size, batch_size, core.drop_last)
    return resume_position(ResumeState(st.seed, st.epoch, st.step, st.world_size, 1, st.offset,
                                        st.order), entries, size, 1, core.drop_last)
