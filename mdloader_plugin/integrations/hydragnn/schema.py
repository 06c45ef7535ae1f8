"""HydraGNN main527's named data schema in ``mdloader train hydragnn``.

HydraGNN main with the named data schema (``main527``) reads a top-level ``Variables`` section
instead of ``NeuralNetwork.Variables_of_interest``::

    Variables:
      inputs:  [{name: atomic_numbers, level: node, dim: 1},
                {name: pos, level: node, dim: 3, role: position}]
      outputs: [{name: energy, level: graph, dim: 1}, {name: forces, level: node, dim: 3}]

Each name is a key of the data file (``[n, dim]`` for node variables, ``[1, dim]`` for graph
ones, as upstream's preprocessing writes them). :class:`NamedSample` turns a record into the
``Data`` the model trains on with upstream's own ``prepare_data_from_schema`` (node inputs
joined into ``x``, outputs into ``y``/``y_loc``, one head a name), for MDLoader and for the
baseline loader alike, so both feed the model the same tensors. :func:`check_keys` refuses, on
rank 0 before anything starts, a name the file does not hold (one line naming the entry, the
file and the keys there). Which form which version reads is :func:`.compat.check_form`.
"""

from __future__ import annotations

import numpy as np

from ...core.errors import ConfigError


def named(cfg: dict) -> bool:
    """Whether `cfg` is in the named-schema form (a top-level ``Variables`` section)."""
    return "Variables" in cfg


def _schema(variables: dict):
    from hydragnn.utils.input_config_parsing.variable_schema import parse_variable_schema

    try:
        return parse_variable_schema(variables)
    except (TypeError, ValueError) as exc:  # upstream's own message names the entry
        raise ConfigError(f"Variables: {exc} (upstream's variable_schema.py; see "
                          "docs/hydragnn-5.md)") from None


class NamedSample:
    """``arrays -> Data``: every key as a tensor (floats as `dtype`), then upstream's
    ``prepare_data_from_schema`` (per graph: no column-wise twin)."""

    def __init__(self, variables: dict, dtype=np.float32):
        from . import graphs

        self.schema = _schema(variables)
        self.base = graphs.make_to_sample(None, None, None, dtype)

    def __call__(self, arrays):
        from hydragnn.utils.input_config_parsing.variable_schema import prepare_data_from_schema

        return prepare_data_from_schema(self.base(arrays), self.schema)


def check_keys(cfg: dict, paths: list[str], label: str = "trainset") -> None:
    """Every name of ``Variables`` is a key of every data file (rank 0, before training)."""
    from ...sources.adios import GraphFile

    schema = _schema(cfg["Variables"])
    for path in paths:
        with GraphFile(path) as f:
            keys = list(f.info(label).keys)
        for group in ("inputs", "outputs"):
            for i, spec in enumerate(getattr(schema, group)):
                if spec.name not in keys:
                    raise ConfigError(f"Variables.{group}[{i}].name {spec.name!r}: {path} "
                                      f"[{label}] has no such key (keys there: "
                                      f"{', '.join(keys)}); name a key of the file, or write "
                                      "one (`mdloader synth --kind gfm` writes atomic_numbers, "
                                      "pos, energy, forces, ...)")
