"""``Training.continue`` / ``startfrom``: start from an earlier run's checkpoint and loader state.

The checkpoint ``logs/<startfrom>/<startfrom>.pk`` (HydraGNN's ``save_model``: model and
optimizer) is loaded by HydraGNN's own ``load_existing_model`` with every ``torch.load`` forced to
``weights_only=True``: tensors and plain containers only, so a file that would run code when
unpickled is refused in one line instead of executed.
``startfrom`` must name a run folder under ``logs/`` (no path, no ``..``), and the checkpoint
must lie inside ``logs/`` once links are followed.

MDLoader adds its loader state: ``logs/<name>/mdloader_state.json`` (the train loader's
``state_dict()``: seed, epoch, step, ..., and the data set, shuffle and drop_last it is valid
for), written atomically (a temporary file in the same folder, flushed to disk, renamed) at the end
of every training epoch (:class:`.epochs.TimedLoader`; HydraGNN writes its checkpoint after the
epoch, so the state on disk is never older than the checkpoint) and when the run ends. A continued
run checks the state against its own train loader (another data set, shuffle or drop_last is one
line naming the file) and shifts the loader's epochs by the epochs the earlier run finished, so
the shuffles go on where that run stopped instead of repeating its epochs 0, 1, ... (HydraGNN
numbers its epochs from ``Training.epoch_start`` again): a run killed during its epoch 2
continues with epoch 2's order.
"""

from __future__ import annotations

import contextlib
import json
import os

from ...core.errors import ConfigError, DataError
from . import compat

STATE_FILE = "mdloader_state.json"


def state_path(name: str) -> str:
    """Where run `name` keeps MDLoader's loader state."""
    return os.path.join("logs", name, STATE_FILE)


def save(loader, name: str, rank: int) -> None:
    """``logs/<name>/mdloader_state.json`` beside HydraGNN's checkpoint, atomically (rank 0
    writes it; a loader without ``state_dict``, HydraGNN's own, writes nothing)."""
    if rank != 0 or not hasattr(loader, "state_dict"):
        return
    from ...estimator.profile import write_atomic

    write_atomic(state_path(name), json.dumps(loader.state_dict()) + "\n")


def check_startfrom(start) -> None:
    """``startfrom`` names a run folder under ``logs/``: a plain name, nothing else."""
    start = str(start)
    if start in ("", ".", "..") or os.path.basename(start) != start or "/" in start \
            or os.sep in start or (os.altsep and os.altsep in start):
        raise ConfigError(f"NeuralNetwork.Training.startfrom: {start!r} is not a run name under "
                          "logs/: give the name of an earlier run (its folder logs/<name>), "
                          "not a path")


def checkpoint_path(start: str) -> str:
    """``logs/<start>/<start>.pk``, refused when missing or when it leads outside ``logs/``."""
    check_startfrom(start)
    ckpt = os.path.join("logs", start, start + ".pk")
    if not os.path.exists(ckpt):
        raise ConfigError(f"NeuralNetwork.Training.startfrom: {start!r} has no checkpoint "
                          f"{ckpt} (run names are folders under logs/)")
    logs, real = os.path.realpath("logs"), os.path.realpath(ckpt)
    if os.path.commonpath([logs, real]) != logs:
        raise ConfigError(f"NeuralNetwork.Training.startfrom: {ckpt} leads to {real}, outside "
                          f"{logs}: copy the checkpoint into logs/{start}/ instead of linking it")
    return ckpt


def load_checkpoint(model, optimizer, start: str) -> None:
    """HydraGNN's own ``load_existing_model`` (multitask branches, 5.0's conditioners, the
    ``module.`` prefix: as the installed version does it) for run `start`, with every
    ``torch.load`` it makes forced to ``weights_only=True``; a file that needs more (arbitrary
    objects, code run on unpickling) is one DataError line naming it."""
    import pickle

    path = checkpoint_path(start)
    try:
        with weights_only_loads():
            compat.get("load_existing_model")(model, start, optimizer=optimizer)
    except pickle.UnpicklingError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DataError(f"{path}: not a HydraGNN checkpoint that torch.load(weights_only=True) "
                        f"accepts ({first}); MDLoader loads only tensors and plain containers: "
                        "save it again with HydraGNN's save_model") from None


@contextlib.contextmanager
def weights_only_loads():
    """While inside: ``torch.load`` always with ``weights_only=True`` (HydraGNN calls it without
    the argument, which a user's ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` turns into a full unpickle).
    Called on the main thread while no other code of ours loads anything."""
    import torch

    real = torch.load

    def load(*args, **kwargs):
        kwargs["weights_only"] = True
        return real(*args, **kwargs)

    torch.load = load
    try:
        yield
    finally:
        torch.load = real


def load(cfg: dict, model, optimizer, loader) -> None:
    """With ``Training.continue``: HydraGNN's checkpoint into model and optimizer, and the
    earlier run's epoch count into the train loader (collective-free; every rank reads and
    checks alike, so every rank raises the same error)."""
    training = cfg["NeuralNetwork"]["Training"]
    if not training.get("continue"):
        return
    start = str(training["startfrom"])
    load_checkpoint(model, optimizer, start)
    path = state_path(start)
    if not hasattr(loader, "epoch_offset") or not os.path.exists(path):
        return
    try:
        with open(path) as f:
            state = json.load(f)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable loader state ({exc}); remove it to continue "
                          "with the loader's epochs from 0") from None
    inner = getattr(loader, "loader", loader)
    if hasattr(inner, "state_dict"):
        from ...loader.args import check_state

        check_state(inner, state, path)
    loader.epoch_offset = int(state["epoch"]) + 1
