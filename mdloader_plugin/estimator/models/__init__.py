"""Cost models, one module per backend, in a registry keyed by backend name.

Every model exposes ``PARAMS`` (profile keys it reads, with unit and meaning; optionally
``OPTIONAL``: keys a profile may lack, each with the key whose value stands in) and
``terms(workload, params) -> {term: seconds}``; the predicted step time is the sum of the terms.
The formulas are in each module's docstring.
"""

from __future__ import annotations

from types import ModuleType

from ...core.errors import ConfigError
from . import collective, onesided
from .workload import Workload, expected_max_normal

MODELS: dict[str, ModuleType] = {
    "onesided": onesided,
    "collective": collective,
}

__all__ = ["MODELS", "Workload", "expected_max_normal", "get_model", "optional_params", "predict",
           "predict_all", "required_params"]


def get_model(name: str) -> ModuleType:
    """The cost model of backend `name`; an unknown name lists the registered ones."""
    try:
        return MODELS[name]
    except KeyError:
        raise ConfigError(f"no cost model for backend {name!r}; "
                          f"known: {', '.join(sorted(MODELS))}") from None


def required_params() -> dict[str, tuple[str, str]]:
    """Union of every model's parameters: name -> (unit, meaning)."""
    out: dict[str, tuple[str, str]] = {}
    for model in MODELS.values():
        out.update(model.PARAMS)
    return out


def optional_params() -> dict[str, tuple[str, str, str]]:
    """Union of every model's optional parameters: name -> (unit, meaning, stand-in key)."""
    out: dict[str, tuple[str, str, str]] = {}
    for model in MODELS.values():
        out.update(getattr(model, "OPTIONAL", {}))
    return out


def predict(name: str, workload: Workload, params: dict) -> float:
    """Predicted seconds per step of backend `name`."""
    return float(sum(get_model(name).terms(workload, params).values()))


def predict_all(workload: Workload, params: dict) -> dict[str, float]:
    """Predicted seconds per step of every backend with a model."""
    return {name: predict(name, workload, params) for name in MODELS}
