"""mpi/failing: which closes take the failing way, and the excepthook that lives while a
multi-rank loader or store is open (the MPI side: tests/integration/test_error_path.py)."""

from __future__ import annotations

import sys

import pytest

from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.mpi import failing


def agreed_error() -> ConfigError:
    exc = ConfigError("same on every rank")
    exc.agreed = True
    return exc


@pytest.mark.parametrize("exc, failing_way", [
    (RuntimeError("x"), True), (MemoryError(), True), (KeyboardInterrupt(), True),
    (SystemExit(2), True), (SystemExit(0), False), (SystemExit(None), False),
    (GeneratorExit(), False), (StopIteration(), False), (agreed_error(), False),
    (ConfigError("this rank only"), True), (None, False)])
def test_which_exceptions_take_the_failing_way(exc, failing_way):
    assert failing.propagating(exc) is (exc if failing_way else None)


def test_close_in_a_finally_sees_the_propagating_exception():
    seen = []

    def close():
        seen.append(failing.propagating())

    with pytest.raises(RuntimeError):
        try:
            raise RuntimeError("step 4")
        finally:
            close()
    try:
        pass
    finally:
        close()
    assert isinstance(seen[0], RuntimeError) and seen[1] is None


def test_the_excepthook_lives_while_something_is_open(monkeypatch):
    calls = []

    def previous(*args):
        calls.append(args[1])

    monkeypatch.setattr(sys, "excepthook", previous)
    failing.opened(False)  # one process: nothing installed
    assert sys.excepthook is previous
    failing.opened()
    failing.opened()
    assert sys.excepthook is failing._excepthook
    failing.closed()
    assert sys.excepthook is failing._excepthook  # one is still open
    exc = agreed_error()
    sys.excepthook(type(exc), exc, None)  # an agreed error: the previous hook, no abort
    assert calls == [exc]
    failing.closed()
    assert sys.excepthook is previous
