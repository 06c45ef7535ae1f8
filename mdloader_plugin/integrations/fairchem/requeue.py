"""Exact requeue for fairchem: MDLoader's own state in fairchem's checkpoint, and back on resume.

fairchem 2.x saves a checkpoint as a DCP folder (``MLIPTrainEvalUnit.save_state``: model,
optimiser, scheduler, ``progress``) and on resume tells the train loader only the epoch and the
steps done in it (``batch_sampler.set_epoch_and_start_iteration(epoch, start_iter)``), which means
"skip ``start_iter`` batches on the same ranks with the same batch size". On another world size or
batch size that skips the wrong samples: some are served twice that epoch, others never.

:class:`LoaderStateCallback` (in ``runner.callbacks``) wraps the unit's ``save_state`` on that
unit instance so every checkpoint folder also gets ``mdloader_state.json`` (rank 0 writes it,
atomically, after fairchem's own files): the loader's ``state_dict()`` (seed, epoch, step, world
size, batch size, offset, order) at fairchem's progress, the data set's size and ``max_atoms``.
On resume it reads that file (rank 0, broadcast) and hands it to the loader, which checks it
against fairchem's own progress (another epoch or step than fairchem's is one error naming both:
the file is not from that checkpoint) and its own data set, shuffle and drop_last, then continues
the epoch exactly (:meth:`~mdloader_plugin.loader.loader.MDLoader.load_state_dict`): every sample of
the epoch served once, on any world size or batch size. A checkpoint without the file (saved
without the callback, or by the ``fairchem`` loader) falls back to ``start_iter`` with one
warning line; a file from another data set (another number of samples, or another
``max_atoms``) is one error line naming the file, and every rank exits 2.
"""

from __future__ import annotations

import json
import logging
import os

from torchtnt.framework.callback import Callback

from ...core.errors import ConfigError

STATE_FILE = "mdloader_state.json"
log = logging.getLogger("fairchem.mdloader")


def checkpoint_payload(loader, epoch: int, step: int) -> dict:
    """What goes into a checkpoint for `loader` (a :class:`.loader.FairchemMDLoader`) when
    fairchem's progress is `step` steps into `epoch`."""
    ld = loader.loader
    core = ld.schedule
    state = dict(ld.state_dict(), epoch=int(epoch), step=int(step),
                 offset=int(core.offset_of(int(epoch))))
    return {"loader": state, "num_samples": int(core.num_samples),
            "max_atoms": getattr(core, "max_nodes", None) if core.order == "max_atoms" else None}


def write_state(loader, location: str, epoch: int, step: int) -> str:
    """Write `loader`'s payload into the checkpoint folder `location` (call on one rank)."""
    from ...estimator.profile import write_atomic

    path = os.path.join(location, STATE_FILE)
    write_atomic(path, json.dumps(checkpoint_payload(loader, epoch, step)))
    return path


def read_state(location: str, comm=None) -> tuple[dict | None, str]:
    """The payload of checkpoint folder `location` (None when it has none), read on rank 0 and
    broadcast over `comm`; a file that is not valid JSON is a ConfigError on every rank."""
    path = os.path.join(location, STATE_FILE)
    got: tuple = (None, None)
    if comm is None or comm.rank == 0:
        try:
            with open(path) as f:
                got = (json.load(f), None)
        except FileNotFoundError:
            got = (None, None)
        except (OSError, ValueError) as exc:
            got = (None, f"{type(exc).__name__}: {exc}")
    if comm is not None and comm.size > 1:
        got = comm.bcast(got)
    if got[1] is not None:
        raise ConfigError(f"checkpoint loader state {path}: {got[1]}; remove the file to resume "
                          "from fairchem's step count alone")
    return got[0], path


def check_payload(payload: dict, loader, path: str) -> dict:
    """The loader state of `payload`, after checking it belongs to `loader`'s data set."""
    core = loader.loader.schedule
    try:
        n, state = int(payload["num_samples"]), dict(payload["loader"])
    except (KeyError, TypeError, ValueError):
        raise ConfigError(f"checkpoint loader state {path}: needs num_samples and loader; "
                          "remove the file to resume from fairchem's step count alone") from None
    if n != core.num_samples:
        raise ConfigError(f"{path}: written for a data set of {n} samples but this run has "
                          f"{core.num_samples}: resume with the data set the checkpoint was "
                          "trained on, or start a new run")
    mine = getattr(core, "max_nodes", None) if core.order == "max_atoms" else None
    if payload.get("max_atoms") != mine:
        raise ConfigError(f"{path}: written for max_atoms={payload.get('max_atoms')} but this "
                          f"run has max_atoms={mine}: resume with the same max_atoms (its "
                          "batches are packed from it)")
    return state


class LoaderStateCallback(Callback):
    """Save MDLoader's state with every fairchem checkpoint, and resume from it (module doc).
    Does nothing when the train loader is not MDLoader."""

    def on_train_start(self, state, unit) -> None:
        from .loader import FairchemMDLoader

        loader = state.train_state.dataloader if state.train_state is not None else None
        if not isinstance(loader, FairchemMDLoader):
            return
        world = loader.loader.world
        comm = world.comm if world is not None and world.size > 1 else None
        save = unit.save_state

        def save_state(location: str, *args, **kwargs):
            out = save(location, *args, **kwargs)
            if comm is None or comm.rank == 0:
                progress = unit.train_progress
                write_state(loader, location, progress.num_epochs_completed,
                            progress.num_steps_completed_in_epoch)
            return out

        unit.save_state = save_state  # this unit instance only
        location = getattr(unit, "lazy_state_location", None)
        if not location:
            return
        payload, path = read_state(location, comm)
        if payload is None:
            return  # the loader warns once as it falls back to fairchem's start_iter
        loader.stage_state(check_payload(payload, loader, path), path)
