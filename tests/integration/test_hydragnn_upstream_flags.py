"""The launcher's table of upstream HydraGNN data flags (``upstream_hooks.FLAGS``): every row is on
the docs page, each says how MDLoader treats the flag, and the refused combinations stop with one
line. The checks are rank-local (arguments and variables may differ by rank under MPMD), so they
are never marked ``agreed``: the launcher runs them through ``mpi.agree.everywhere``, which makes
an error on any rank one line on every rank (tests/mpi_scripts/agree_checks.py)."""

import pytest

from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.integrations.hydragnn.upstream import hooks as upstream_hooks
from mpirun import ROOT

PAGE = ROOT / "docs" / "hydragnn-upstream-scripts.md"


def test_every_flag_row_is_on_the_docs_page():
    text = PAGE.read_text()
    for flag, what in upstream_hooks.FLAGS:
        cell = ", ".join(f"`{x.strip()}`" for x in flag.split(", "))
        assert f"| {cell} | {what} |" in text, f"{flag}: row missing or stale on {PAGE.name}"


def test_every_row_says_how_the_flag_is_treated():
    hows = ("honoured", "mapped", "ignored", "refused", "--adios", "all:", "whose", "MDLoader")
    for flag, what in upstream_hooks.FLAGS:
        assert what.split()[0].rstrip(":") in {h.rstrip(":") for h in hows}, flag


@pytest.mark.parametrize("argv, words", [
    (["--ddstore", "--shmem"], "--shmem"),
    (["--pickle", "--ddstore"], "--pickle with --ddstore"),
])
def test_refused_combinations_are_one_line(argv, words):
    with pytest.raises(ConfigError) as err:
        upstream_hooks.refuse(argv)
    assert words in str(err.value) and "\n" not in str(err.value)
    assert not getattr(err.value, "agreed", False)  # rank-local: agreed by the launcher


def test_flag_notes_name_the_data_flags_in_use(monkeypatch):
    monkeypatch.setenv("HYDRAGNN_MAX_NUM_BATCH", "3")
    notes = upstream_hooks.flag_notes(["--ddstore", "--ddstore_width", "2", "--log", "x"])
    assert "--ddstore -> mapped" in notes and "--ddstore_width -> mapped" in notes
    assert "HYDRAGNN_MAX_NUM_BATCH -> honoured" in notes
    assert not any(n.startswith("--log") for n in notes)


def test_mdloader_reader_picks_whose_reader_serves_adios_dataset(monkeypatch):
    """MDLOADER_READER (documented for the launcher): mdloader / upstream force the choice, in
    any case; unset follows ADIOS2 (PyPI's serial wheel here: MDLoader's reader); anything else
    is one line naming the value (rank-local: the launcher agrees it)."""
    import adios2

    monkeypatch.setenv("MDLOADER_READER", "Upstream")
    assert upstream_hooks.reader_wanted() is False
    monkeypatch.setenv("MDLOADER_READER", "mdloader")
    assert upstream_hooks.reader_wanted() is True
    monkeypatch.delenv("MDLOADER_READER")
    assert upstream_hooks.reader_wanted() is (not getattr(adios2, "is_built_with_mpi", False))
    monkeypatch.setenv("MDLOADER_READER", "ddstore")
    with pytest.raises(ConfigError) as err:
        upstream_hooks.reader_wanted()
    assert str(err.value) == "MDLOADER_READER='ddstore': choose mdloader or upstream"
    assert not getattr(err.value, "agreed", False)
