"""``Training.continue`` in one process: nothing read from disk executes, ``startfrom`` stays under
``logs/``, the loader state is written atomically and checked against the continuing loader.
(A run killed mid-epoch and continued on 2 ranks: test_hydragnn_continue_mpi.py.)"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mdloader_plugin.core.errors import ConfigError, DataError  # noqa: E402
from mdloader_plugin.integrations.hydragnn import resume  # noqa: E402


class Payload:
    """Unpickling this runs ``open(marker, "w")``: what a hostile checkpoint could do."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _cfg(start: str) -> dict:
    return {"NeuralNetwork": {"Training": {"continue": 1, "startfrom": start}}}


class Wrapped(torch.nn.Module):
    """Keys ``module.weight``, ``module.bias``: what HydraGNN's DDP-wrapped model has."""

    def __init__(self):
        super().__init__()
        self.module = torch.nn.Linear(3, 1)


def _model():
    torch.manual_seed(0)
    model = Wrapped()
    return model, torch.optim.AdamW(model.parameters(), lr=0.01)


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs" / "old").mkdir(parents=True)
    return tmp_path


def test_a_checkpoint_that_would_run_code_is_refused_not_executed(run_dir, monkeypatch):
    # torch's own default would refuse it too; this variable turns that default off, as a user's
    # environment may: the refusal must not depend on it
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    marker = run_dir / "ran"
    torch.save({"model_state_dict": Payload(str(marker))}, "logs/old/old.pk")
    model, opt = _model()
    with pytest.raises(DataError) as e:
        resume.load(_cfg("old"), model, opt, None)
    assert not marker.exists()
    msg = str(e.value)
    assert msg.startswith("logs/old/old.pk: not a HydraGNN checkpoint that "
                          "torch.load(weights_only=True) accepts") and "\n" not in msg


def test_a_checkpoint_of_weights_is_loaded_into_model_and_optimizer(run_dir):
    saved, opt = _model()
    saved.module(torch.ones(2, 3)).sum().backward()
    opt.step()
    torch.save({"model_state_dict": saved.module.state_dict(),  # saved without DDP's prefix
                "optimizer_state_dict": opt.state_dict()}, "logs/old/old.pk")
    model = Wrapped()
    fresh = torch.optim.AdamW(model.parameters(), lr=0.01)
    resume.load(_cfg("old"), model, fresh, None)
    assert torch.equal(model.module.weight, saved.module.weight)
    assert fresh.state_dict()["state"][0]["step"] == 1


@pytest.mark.parametrize("start", ["../old", "/tmp/old", "logs/old", ".."])
def test_startfrom_that_is_not_a_run_name_under_logs_is_one_line(run_dir, start):
    model, opt = _model()
    with pytest.raises(ConfigError) as e:
        resume.load(_cfg(start), model, opt, None)
    assert str(e.value) == (f"NeuralNetwork.Training.startfrom: {start!r} is not a run name "
                            "under logs/: give the name of an earlier run (its folder "
                            "logs/<name>), not a path")


def test_a_checkpoint_linked_from_outside_logs_is_refused(run_dir):
    model, opt = _model()
    torch.save({"model_state_dict": model.state_dict()}, run_dir / "elsewhere.pk")
    os.symlink(run_dir / "elsewhere.pk", "logs/old/old.pk")
    with pytest.raises(ConfigError, match=r"logs/old/old.pk leads to .*elsewhere.pk, outside "):
        resume.load(_cfg("old"), model, opt, None)


def test_the_config_check_refuses_such_a_startfrom_before_training():
    from mdloader_plugin.integrations.hydragnn import compat, config
    from mpirun import ROOT

    cfg = config.load(str(ROOT / "recipes" / "hydragnn" / "demo.yaml"),
                      ["NeuralNetwork.Training.continue=1",
                       "NeuralNetwork.Training.startfrom=../../etc"])
    with pytest.raises(ConfigError, match="startfrom: '../../etc' is not a run name under logs/"):
        compat.check_config(cfg, compat.require_hydragnn())


def _loader(n: int):
    from mdloader_plugin.loader.loader import MDLoader
    from mdloader_plugin.store.shard import ShardStore

    store = ShardStore.from_samples(None, [{"sid": np.array([i])} for i in range(n)], n)
    return MDLoader(store, batch_size=4, seed=3, backend="onesided", prefetch=0,
                    to_sample=lambda a: int(a["sid"][0]), collate=list)


def test_the_state_is_written_atomically(run_dir, monkeypatch):
    ld = _loader(23)
    list(ld)
    synced, replaced = [], []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: replaced.append((a, b)) or real_replace(a, b))
    resume.save(ld, "old", 0)
    (tmp, dst), = replaced
    assert synced and os.fspath(dst) == resume.state_path("old")
    assert os.path.dirname(os.path.abspath(tmp)) == os.path.abspath("logs/old")
    assert not os.path.exists(tmp)
    assert json.loads(open(dst).read()) == ld.state_dict()


class Timed:
    """What ``resume.load`` sees of :class:`.epochs.TimedLoader`."""

    def __init__(self, loader):
        self.loader, self.epoch_offset = loader, 0


def test_a_state_of_another_data_set_is_one_line_naming_the_file(run_dir):
    model, opt = _model()
    torch.save({"model_state_dict": model.state_dict()}, "logs/old/old.pk")
    ld = _loader(23)
    ld.set_epoch(4)
    list(ld)
    resume.save(ld, "old", 0)
    same = Timed(_loader(23))
    resume.load(_cfg("old"), model, opt, same)
    assert same.epoch_offset == 5  # epochs 0..4 done: the next is 5
    with pytest.raises(ConfigError) as e:
        resume.load(_cfg("old"), model, opt, Timed(_loader(30)))
    assert str(e.value).startswith("logs/old/mdloader_state.json: written for a data set of 23 "
                                   "samples (built in memory) but this run has a data set of 30 "
                                   "samples")
