"""How several data sets share an epoch: one registry of sampling rules (one file each).

Every rule takes the same arguments (``DataSets``, the spec dict, the world size) and returns a
:class:`~.base.Mix`, whose epoch list the sampler shuffles and deals. ``spec`` is a mapping with
``type`` and the rule's options, e.g. ``{type: temperature, temperature: 2.0}``. No MPI here.
"""

from __future__ import annotations

from typing import Callable

from .base import DataSets, Mix
from .chunks import ChunksMix
from .fairchem import TYPES as FAIRCHEM_TYPES
from .fairchem import FairchemMix
from .hydragnn import HydraGNNMix
from .proportional import Proportional
from .weights import Weights

__all__ = ["DataSets", "Mix", "MIXES", "get_mix", "parse_spec"]

MIXES: dict[str, Callable[..., Mix]] = {"proportional": Proportional, "weights": Weights,
                                        "hydragnn": HydraGNNMix, "chunks": ChunksMix,
                                        **{t: FairchemMix for t in FAIRCHEM_TYPES}}


def parse_spec(spec) -> dict:
    """``None`` / a type name / ``TYPE:k=v,k=v`` / a mapping -> a spec mapping with ``type``."""
    import yaml

    if spec is None:
        return {"type": "proportional"}
    if isinstance(spec, str):
        kind, _, rest = spec.partition(":")
        out = {"type": kind.strip()}
        for item in _top_level_items(rest):
            key, sep, val = item.partition("=")
            if not sep:
                raise ValueError(f"sampling {spec!r}: expected TYPE:key=value,..., e.g. "
                                 "temperature:temperature=2")
            try:
                out[key.strip()] = yaml.safe_load(val)
            except yaml.YAMLError:
                raise ValueError(f"sampling {spec!r}: {val!r} is not a value") from None
        return out
    if not isinstance(spec, dict) or "type" not in spec:
        raise ValueError(f"sampling must be a mapping with 'type', got {spec!r}")
    return dict(spec)


def _top_level_items(text: str) -> list[str]:
    """``a=1,b=[1,2],c={x: 1, y: 2}`` -> its three items (commas inside brackets kept)."""
    items, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch in "[{") - (ch in "]}")
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    return [x.strip() for x in items + [cur] if x.strip()]


def get_mix(spec, sets: DataSets, world_size: int) -> Mix:
    """The mix `spec` names over `sets` (ValueError with the valid choices if it is unknown)."""
    spec = parse_spec(spec)
    try:
        make = MIXES[spec["type"]]
    except (KeyError, TypeError):
        raise ValueError(f"sampling type {spec['type']!r} is unknown; choose one of "
                         f"{', '.join(MIXES)}") from None
    return make(sets, spec, world_size)
