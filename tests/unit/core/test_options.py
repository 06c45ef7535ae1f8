"""core/options: every setting has one documented row, and code can read only those."""

import pytest

from mdloader_plugin.core import options


def test_env_reads_the_variable_or_its_documented_default(monkeypatch):
    monkeypatch.delenv("MDLOADER_FETCH_TIMEOUT", raising=False)
    assert options.env("MDLOADER_FETCH_TIMEOUT") == "600"
    monkeypatch.setenv("MDLOADER_FETCH_TIMEOUT", "")
    assert options.env("MDLOADER_FETCH_TIMEOUT") == ""  # set, even empty, wins
    monkeypatch.setenv("MDLOADER_FETCH_TIMEOUT", "7")
    assert options.env("MDLOADER_FETCH_TIMEOUT") == "7"


def test_undocumented_variable_is_refused(monkeypatch):
    monkeypatch.setenv("MDLOADER_NOT_A_SETTING", "1")
    with pytest.raises(KeyError):
        options.env("MDLOADER_NOT_A_SETTING")
    with pytest.raises(KeyError):
        options.env_default("MDLOADER_NOT_A_SETTING")


def test_every_row_is_unique_and_explained():
    for table in (options.SCALE, options.ENV):
        names = [o.name for o in table]
        assert len(names) == len(set(names))
        assert all(o.meaning.strip().endswith((".", ")")) for o in table), names
    assert all(o.name.startswith("MDLOADER_") for o in options.ENV)


def test_defaults_keep_table_order():
    assert list(options.defaults(options.SCALE)) == [o.name for o in options.SCALE]
    assert options.defaults(options.SCALE)["order"] == "auto"
