"""Byte sizes: parse what users write (``4GiB``, ``512MB``) and print sizes for people.

One copy of each for the whole package (settings, CLI options, budget errors, log lines).
"""

from __future__ import annotations

import math
import re

import numpy as np

from .errors import ConfigError

__all__ = ["human", "mib", "parse_bytes"]

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
          "gb": 10**9, "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30,
          "tib": 2**40}
_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_bytes(value, what: str = "max_memory_per_rank") -> int | None:
    """``None``/``""`` -> no budget; an int or a string like ``"4GiB"`` -> bytes (> 0)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ConfigError(f"{what}: expected bytes or a size like '4GiB', got {value!r}")
    if isinstance(value, (int, np.integer, float)):
        n = value
    else:
        m = _PATTERN.match(str(value))
        unit = m and _UNITS.get(m.group(2).lower())
        if not m or unit is None:
            raise ConfigError(f"{what}: {value!r} is not a size; write bytes or a number with a "
                              "unit, e.g. 4GiB, 512MiB, 8GB")
        n = float(m.group(1)) * unit
    if not math.isfinite(n) or n <= 0:
        raise ConfigError(f"{what} must be positive, got {value!r}")
    return int(n)


def human(n: float) -> str:
    """``n`` bytes as a short human-readable size (``1.5 GiB``, ``12.0 MiB``, ``512 B``)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def mib(n: float) -> str:
    """``n`` bytes in MiB with one decimal (``12.0 MiB``): log lines whose sizes are compared
    across ranks and runs keep one unit."""
    return f"{n / 2**20:.1f} MiB"
