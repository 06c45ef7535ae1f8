"""records/kernels: the compiled module or None (``MDLOADER_KERNELS``), why not in one warning
line said once, the timed wrapper the benchmarks use, and kernels that refuse bad sizes and
write nothing. (Batches built with them: tests/unit/batching/test_compiled_collate.py.)"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.records import codec, kernels

needs_kernels = pytest.mark.skipif(kernels.get() is None,
                                   reason=f"compiled kernels not built: {kernels.why_not()}")


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    """Each test loads the kernels anew (and leaves them loaded afresh)."""
    monkeypatch.delenv("MDLOADER_KERNELS", raising=False)
    kernels.reset()
    yield
    kernels.reset()


class Log:
    def __init__(self):
        self.lines = []

    def warning(self, line):
        self.lines.append(line)


def test_off_means_none_and_no_warning(monkeypatch):
    monkeypatch.setenv("MDLOADER_KERNELS", "off")
    log = Log()
    assert kernels.get() is None and kernels.why_not() == "MDLOADER_KERNELS=off"
    kernels.warn_once(log)
    assert log.lines == [] and kernels.timed() is None


def test_a_bad_setting_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("MDLOADER_KERNELS", "fast")
    with pytest.raises(ConfigError) as e:
        kernels.get()
    assert str(e.value) == "MDLOADER_KERNELS must be 'auto' or 'off', got 'fast'"


def test_unavailable_kernels_warn_once_with_the_reason_and_the_fix(monkeypatch):
    monkeypatch.setattr(kernels, "_load", lambda: (None, "ImportError: no _kernels built"))
    log = Log()
    assert kernels.get() is None
    kernels.warn_once(log)
    kernels.warn_once(log)
    assert log.lines == [
        "compiled batch kernels unavailable (ImportError: no _kernels built): batches are built "
        f"with numpy, which holds the trainer's GIL longer; build them with {kernels.BUILD_HINT}"]


@needs_kernels
def test_loaded_kernels_say_nothing(caplog):
    assert kernels.why_not() is None and kernels.get() is kernels.get()
    with caplog.at_level(logging.WARNING):
        kernels.warn_once()
    assert caplog.records == []


@needs_kernels
def test_timed_kernels_count_calls_and_cpu():
    t = kernels.timed()
    assert kernels.get() is t and kernels.timed() is t  # swapped in once
    src, dst = np.arange(10, dtype=np.uint8), np.zeros(4, dtype=np.uint8)
    one = np.ones(1, dtype=np.int64)
    assert t.copy_records(src, 3 * one, 4 * one, dst, 0 * one) == 0
    assert dst.tolist() == [3, 4, 5, 6] and t.calls == 1 and t.cpu_s >= 0
    t.copy_records(src, 8 * one, 4 * one, dst, 0 * one)  # refused, still counted
    assert t.calls == 2


def _records(samples):
    recs = [codec.encode(s) for s in samples]
    nb = np.array([r.size for r in recs], dtype=np.int64)
    return np.concatenate(recs), np.concatenate([[0], np.cumsum(nb)[:-1]]).astype(np.int64), nb


@needs_kernels
def test_kernels_refuse_bad_sizes_and_write_nothing():
    k = kernels.get()
    buf, offs, nbytes = _records([{"x": np.arange(6, dtype=np.int64).reshape(3, 2)}] * 2)
    pay, cnt, ext = np.empty((3, 1, 2), dtype=np.int64)
    axes = np.zeros(1, dtype=np.int64)
    assert k.scan(buf, offs, nbytes, axes, pay, cnt, ext) == (0, -1, -1)
    short = nbytes.copy()
    short[1] = 24  # a record cut short: its payload would run past it
    assert k.scan(buf, offs, short, axes, pay, cnt, ext)[:2] == (1, 1)
    out = np.full(5, -7, dtype=np.int64)  # one element too few
    slices, vec = np.zeros((1, 3), dtype=np.int64), np.empty(6, dtype=np.int64)
    assert k.fill(buf, pay, cnt, ext, np.ones(1, np.int64), [out], np.full(1, -1, np.int64),
                  0, slices, vec) == 1
    assert (out == -7).all() and (slices == 0).all()
    src = np.arange(10, dtype=np.uint8)
    dst = np.zeros(4, dtype=np.uint8)
    assert k.copy_records(src, np.array([8]), np.array([4]), dst, np.array([0])) == 1
    assert (dst == 0).all()
