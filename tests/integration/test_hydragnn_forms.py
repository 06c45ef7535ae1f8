"""Single process, no HydraGNN needed: which variable form each HydraGNN version reads (the
named data schema of main527 against ``Variables_of_interest``), and the launcher's epoch timer
around upstream's loaders (only the passes upstream's training loop starts are timed)."""

from __future__ import annotations

import pytest

from mdloader_plugin.core.epochlog import parse_epoch_lines
from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.integrations.hydragnn import compat, config
from mdloader_plugin.integrations.hydragnn.upstream import timing
from test_hydragnn import DEMO, _Loader, hydragnn_log
from test_hydragnn_compat import _Sampler

NAMED = DEMO.parent / "named.yaml"


def test_both_forms_load_and_each_needs_its_own_keys():
    assert "Variables" in config.load(NAMED) and "Variables" not in config.load(DEMO)
    with pytest.raises(ConfigError, match="Variables.outputs is missing"):
        config.load(NAMED, ["Variables={inputs: []}"])


@pytest.mark.parametrize("ver", ["3.0", "5.0", "main"])
def test_named_form_on_an_older_version_is_one_line(ver):
    with pytest.raises(ConfigError) as err:
        compat.check_config(config.load(NAMED), ver)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("Variables:") and f"HydraGNN {ver} reads" in msg
    assert "NeuralNetwork.Variables_of_interest" in msg


def test_positional_form_on_main527_is_one_line():
    with pytest.raises(ConfigError) as err:
        compat.check_config(config.load(DEMO), "main527")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("NeuralNetwork.Variables_of_interest: HydraGNN "
                                              "main527") and "top-level Variables" in msg
    compat.check_config(config.load(NAMED), "main527")  # its own form passes
    assert compat.train_config({"NeuralNetwork": 1, "Variables": 2}, "main527") == {
        "NeuralNetwork": 1, "Variables": 2}
    assert compat.train_config({"NeuralNetwork": 1}, "main") == 1


def test_upstream_loader_is_timed_only_after_set_epoch(tmp_path):
    """Upstream's graph-size scan iterates (and may exhaust) the train loader on some ranks
    only: such a pass must neither log nor enter the epoch's reduction; the training loop's
    passes (each after set_epoch) log one line each, with the batch cap upstream's loop uses."""
    from mpi4py import MPI

    loader = _Loader()
    loader.sampler = _Sampler()
    timed = timing.ArmedTimedLoader(loader, MPI.COMM_SELF, run="t", loader_name="hydragnn",
                                    max_batches=2)
    with hydragnn_log(tmp_path / "run.log"):
        assert len(list(timed)) == 3  # the scan: untimed, uncapped
        for epoch in range(2):
            timed.sampler.set_epoch(epoch)
            assert len(list(timed)) == 2
        assert len(list(timed)) == 3
    recs = parse_epoch_lines((tmp_path / "run.log").read_text().splitlines())
    assert [(r["epoch"], r["steps"], r["loader"]) for r in recs] == [(0, 2, "hydragnn"),
                                                                      (1, 2, "hydragnn")]
    assert loader.sampler.seen == [0, 1]


def test_time_upstream_names_the_loader_and_takes_the_cap(monkeypatch):
    monkeypatch.setenv("HYDRAGNN_MAX_NUM_BATCH", "1")
    timed, val, test = timing.time_upstream((_Loader(), "v", "t"), run="train")
    assert (timed.loader_name, timed.max_batches, val, test) == ("mdloader", 1, "v", "t")
    plain = type("Plain", (), {"__len__": lambda self: 3, "sampler": None})()
    monkeypatch.delenv("HYDRAGNN_MAX_NUM_BATCH")
    assert timing.time_upstream((plain, 0, 0), run="train")[0].loader_name == "hydragnn"
