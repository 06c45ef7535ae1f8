"""``Training.continue`` / ``startfrom``: start from an earlier run's checkpoint and loader state.

HydraGNN's own ``load_existing_model_config`` (as upstream's ``run_training`` calls it) loads
``logs/<startfrom>/<startfrom>.pk`` into the model and optimizer. MDLoader adds its loader
state: every run writes ``logs/<name>/mdloader_state.json`` (the train loader's
``state_dict()``: seed, epoch, step, ...). A continued run shifts the train loader's epochs by
the epochs the earlier run finished, so the shuffles go on where that run stopped instead of
repeating its epochs 0, 1, ... (HydraGNN numbers its epochs from ``Training.epoch_start`` again).
"""

from __future__ import annotations

import json
import os

from ...core.errors import ConfigError
from . import compat

STATE_FILE = "mdloader_state.json"


def state_path(name: str) -> str:
    """Where run `name` keeps MDLoader's loader state."""
    return os.path.join("logs", name, STATE_FILE)


def save(loader, name: str, rank: int) -> None:
    """``logs/<name>/mdloader_state.json`` beside HydraGNN's checkpoint (rank 0 writes it)."""
    if rank != 0 or not hasattr(loader, "state_dict"):
        return
    with open(state_path(name), "w") as f:
        json.dump(loader.state_dict(), f)


def load(cfg: dict, model, optimizer, loader) -> None:
    """With ``Training.continue``: HydraGNN's checkpoint into model and optimizer, and the
    earlier run's epoch count into the train loader (collective-free; every rank reads)."""
    training = cfg["NeuralNetwork"]["Training"]
    if not training.get("continue"):
        return
    start = str(training["startfrom"])
    ckpt = os.path.join("logs", start, start + ".pk")
    if not os.path.exists(ckpt):
        raise ConfigError(f"NeuralNetwork.Training.startfrom: {start!r} has no checkpoint "
                          f"{ckpt} (run names are folders under logs/)")
    compat.get("load_existing_model")(model, start, optimizer=optimizer)
    path = state_path(start)
    if hasattr(loader, "epoch_offset") and os.path.exists(path):
        with open(path) as f:
            state = json.load(f)
        loader.epoch_offset = int(state["epoch"]) + 1
