"""The compiled kernels (``_kernels.c``: batch building and the ``feistel`` epoch order), or
None: numpy does the same work then.

The extension is built by the install (``setup.py``, ``optional=True``: a machine without a C
compiler still installs). :func:`get` returns the module when it loads and
``MDLOADER_KERNELS`` is not ``off``; otherwise None, and the first caller that wanted it logs
one warning line saying why and how to build it. Each kernel checks every size and bound it is
given and returns a non-zero code instead of writing past one; its callers then take the numpy
path, which gives the same bytes (tests/unit/batching/test_compiled_collate.py and
tests/unit/sampling/test_order.py compare them).
"""

from __future__ import annotations

import logging

from ..core.errors import ConfigError
from ..core.options import env

_STATE: dict = {}
BUILD_HINT = "pip install -e . (or python setup.py build_ext --inplace) with a C compiler"


def get():
    """The ``_kernels`` module, or None (compiled path off or unavailable)."""
    if "mod" not in _STATE:
        _STATE["mod"], _STATE["why"] = _load()
    return _STATE["mod"]


def why_not() -> str | None:
    """Why :func:`get` returns None (None when it does not)."""
    get()
    return _STATE["why"]


def warn_once(log: logging.Logger | None = None) -> None:
    """Log one warning line when the kernels were wanted but did not load (once a process)."""
    why = why_not()
    if why is None or _STATE.get("warned") or why.startswith("MDLOADER_KERNELS=off"):
        return
    _STATE["warned"] = True
    (log or logging.getLogger("mdloader")).warning(
        f"compiled batch kernels unavailable ({why}): batches are built with numpy, which "
        f"holds the trainer's GIL longer; build them with {BUILD_HINT}")


def _load():
    setting = str(env("MDLOADER_KERNELS")).strip().lower()
    if setting in ("off", "0", "false", "no"):
        return None, "MDLOADER_KERNELS=off"
    if setting not in ("auto", "on", "1", "true", "yes", ""):
        raise ConfigError(f"MDLOADER_KERNELS must be 'auto' or 'off', got {setting!r}")
    try:
        from . import _kernels
    except ImportError as exc:  # not built, or built for another Python
        return None, f"{type(exc).__name__}: {exc}"
    return _kernels, None


def reset() -> None:
    """Forget the loaded state (tests switch ``MDLOADER_KERNELS``)."""
    _STATE.clear()


class _Timed:
    """The kernels with the thread CPU time inside each call summed
    (``bench/gil/producer_cost.py`` reports it as the GIL-free time a batch; the few argument
    checks each call makes with the GIL held are counted in it too)."""

    def __init__(self, mod):
        import time

        self.cpu_s, self.calls = 0.0, 0
        for name in ("copy_records", "scan", "join", "shift", "repeat", "fill"):
            setattr(self, name, self._wrap(getattr(mod, name), time.thread_time))

    def _wrap(self, fn, clock):
        def timed(*args):
            t0 = clock()
            try:
                return fn(*args)
            finally:
                self.cpu_s += clock() - t0
                self.calls += 1
        return timed


def timed() -> _Timed | None:
    """Swap in timed kernels (benchmarks only) and return them; None when there are none."""
    mod = get()
    if mod is None:
        return None
    if not isinstance(mod, _Timed):
        _STATE["mod"] = _Timed(mod)
    return _STATE["mod"]
