"""``proportional`` (the default): every sample once an epoch, what concatenating the files gives;
each data set's share of an epoch is its share of the samples (the single-file order)."""

from __future__ import annotations

from .base import DataSets, Mix


class Proportional(Mix):
    """Every sample once an epoch (the single-file order)."""

    name = "proportional"

    def __init__(self, sets: DataSets, spec: dict, world_size: int):
        super().__init__(sets, sets.sizes)
