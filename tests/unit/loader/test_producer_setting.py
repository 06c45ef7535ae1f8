"""The producer setting: ``"thread"`` (the default); the removed helper process (``"process"``)
is still accepted, with one deprecation line, and runs the thread producer (same batches). The
same for ``online_check``, the old name of ``online_trial`` (on real ranks:
tests/mpi_scripts/online_switch.py)."""

import logging

import pytest

from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.sources import synth
from mdloader_plugin.store.shard import ShardStore
from pyg_equal import batch_diff


def _store(n: int = 24):
    return ShardStore.from_samples(None, list(synth.generate("hydragnn", 3, 0, n)), n)


@pytest.fixture(autouse=True)
def _propagate(monkeypatch):
    """caplog listens on the root logger; MDLoader's own logger does not propagate."""
    from mdloader_plugin.core.log import get_logger

    monkeypatch.setattr(get_logger(), "propagate", True)


def test_process_producer_is_deprecated_and_runs_the_thread(caplog):
    store = _store()
    with caplog.at_level(logging.WARNING, logger="mdloader"):
        with MDLoader(store, batch_size=8, backend="onesided", seed=1, producer="process") as ld:
            assert ld.producer == "thread"
            got = list(ld)
    lines = [r.message for r in caplog.records if "deprecated" in r.message]
    assert len(lines) == 1 and "producer='process' is deprecated and ignored" in lines[0]
    assert "\n" not in lines[0]
    with MDLoader(store, batch_size=8, backend="onesided", seed=1) as ref:
        want = list(ref)
    assert len(got) == len(want) > 0
    assert all(batch_diff(g, w) == "" for g, w in zip(got, want))
    store.close()


def test_the_environment_variable_is_deprecated_too(monkeypatch, caplog):
    monkeypatch.setenv("MDLOADER_PRODUCER", "process")
    store = _store(8)
    with caplog.at_level(logging.WARNING, logger="mdloader"):
        with MDLoader(store, batch_size=4, backend="onesided") as ld:
            assert ld.producer == "thread" and len(list(ld)) == 2
    assert any("MDLOADER_PRODUCER='process' is deprecated" in r.message for r in caplog.records)
    store.close()


def test_a_bad_producer_is_one_clear_error(monkeypatch):
    store = _store(8)
    with pytest.raises(ConfigError, match=r"producer must be 'thread' \(or the deprecated "
                                          r"'process'\), got 'fork'"):
        MDLoader(store, batch_size=4, backend="onesided", producer="fork")
    store.close()


def test_online_check_is_the_deprecated_name_of_online_trial(caplog):
    store = _store()
    kw = dict(batch_size=8, backend="auto", seed=1)
    with caplog.at_level(logging.WARNING, logger="mdloader"):
        with MDLoader(store, online_check=False, **kw) as old:
            got = list(old)
    lines = [r.message for r in caplog.records if "deprecated" in r.message]
    assert lines == ["[train] online_check=False is deprecated: it is now online_trial=False "
                     "(same behaviour)"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mdloader"):
        with MDLoader(store, online_trial=False, **kw) as new:
            want = list(new)
    assert not [r for r in caplog.records if "deprecated" in r.message]
    assert len(got) == len(want) > 0
    assert all(batch_diff(g, w) == "" for g, w in zip(got, want))
    with pytest.raises(ConfigError, match="online_trial=False and online_check=True disagree"):
        MDLoader(store, online_trial=False, online_check=True, **kw)
    store.close()
