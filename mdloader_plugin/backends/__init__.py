"""Ways of moving sample bytes between ranks: one file a backend, a registry by name.

Every backend takes the same arguments and has the same ``fetch(plan)``: given the step's plan
(``[P, b]`` sample ids, row ``r`` = what rank ``r`` needs) it returns this rank's records in plan
order as a :class:`~mdloader_plugin.backends.base.Fetched`.
"""

from __future__ import annotations

from .base import Backend, Fetched
from .collective import CollectiveBackend
from .onesided import OneSidedBackend

BACKENDS: dict[str, type[Backend]] = {
    "onesided": OneSidedBackend,
    "collective": CollectiveBackend,
}


def get_backend(name: str) -> type[Backend]:
    """The backend class registered as `name`; an unknown name lists the registered ones."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; choose one of: "
                         + ", ".join(sorted(BACKENDS)) + " (or 'auto')") from None


__all__ = ["BACKENDS", "Backend", "Fetched", "get_backend"]
