"""The requeue callback in one process: fairchem's ``save_state`` also writes MDLoader's state into
the checkpoint folder; a resume stages it in place of fairchem's ``start_iter``; a checkpoint
without it falls back to ``start_iter`` with one warning line; another data set's state is one
error line. (Resume on other world sizes: tests/integration/test_fairchem_requeue_mpi.py.)"""

from __future__ import annotations

import json
import logging
import types

import numpy as np
import pytest

pytest.importorskip("torchtnt")

from mdloader_plugin.core.errors import ConfigError  # noqa: E402
from mdloader_plugin.integrations.fairchem.loader import FairchemMDLoader  # noqa: E402
from mdloader_plugin.integrations.fairchem.requeue import (  # noqa: E402
    STATE_FILE, LoaderStateCallback)
from mdloader_plugin.loader.loader import MDLoader  # noqa: E402
from mdloader_plugin.sampling.max_atoms import MaxAtomsBatches  # noqa: E402
from mdloader_plugin.store.shard import ShardStore  # noqa: E402

N = 60
NATOMS = (np.arange(N) * 13) % 40 + 3


@pytest.fixture
def make():
    made = []

    def _make(n=N):
        natoms = NATOMS[:n] if n <= N else np.resize(NATOMS, n)
        store = ShardStore.from_samples(None, [{"sid": np.array([i]),
                                                "pos": np.zeros((natoms[i], 3), np.float32)}
                                               for i in range(n)], n)
        md = MDLoader(store, batch_size=3, seed=2, backend="collective", prefetch=0,
                      batches=MaxAtomsBatches(natoms, 60, 1, seed=2),
                      to_sample=lambda a: int(a["sid"][0]), collate=list)
        made.append((md, store))
        return FairchemMDLoader(md, ["oc20.train"])

    yield _make
    for md, store in made:
        md.close()
        store.close()


class Unit:
    """What the callback touches of fairchem's MLIPTrainEvalUnit."""

    def __init__(self, epoch=0, step=0, location=None):
        self.train_progress = types.SimpleNamespace(num_epochs_completed=epoch,
                                                    num_steps_completed_in_epoch=step)
        self.lazy_state_location = location
        self.saved = []

    def save_state(self, location):
        self.saved.append(location)


def _start(loader, unit):
    state = types.SimpleNamespace(train_state=types.SimpleNamespace(dataloader=loader))
    LoaderStateCallback().on_train_start(state, unit)


@pytest.fixture
def warnings_seen():
    seen = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda rec: seen.append(rec.getMessage())
    logging.getLogger("mdloader").addHandler(handler)
    yield seen
    logging.getLogger("mdloader").removeHandler(handler)


def test_checkpoint_holds_the_state_and_a_resume_continues_from_it(make, tmp_path, warnings_seen):
    loader = make()
    unit = Unit()
    _start(loader, unit)
    loader.batch_sampler.set_epoch_and_start_iteration(1, 0)
    it = iter(loader)
    first = [next(it) for _ in range(3)]
    unit.train_progress.num_epochs_completed, unit.train_progress.num_steps_completed_in_epoch \
        = 1, 3
    unit.save_state(str(tmp_path))  # the wrapped save: fairchem's, then MDLoader's file
    assert unit.saved == [str(tmp_path)]
    payload = json.loads((tmp_path / STATE_FILE).read_text())
    assert payload["loader"]["epoch"] == 1 and payload["loader"]["step"] == 3
    assert payload["num_samples"] == N and payload["max_atoms"] == 60
    rest = list(it)

    again = make()
    again.batch_sampler.set_epoch_and_start_iteration(1, 3)  # fairchem's call, then ours
    _start(again, Unit(1, 3, str(tmp_path)))
    assert list(again) == rest and not warnings_seen
    assert sorted(i for b in first + rest for i in b) == list(range(N))


def test_checkpoint_without_state_falls_back_with_one_warning(make, tmp_path, warnings_seen):
    loader = make()
    _start(loader, Unit(1, 2, str(tmp_path)))
    loader.batch_sampler.set_epoch_and_start_iteration(1, 2)
    served = list(loader)
    assert len(served) == len(loader) - 2
    assert len(warnings_seen) == 1 and "without MDLoader's state" in warnings_seen[0]


def test_state_of_another_data_set_is_one_error(make, tmp_path):
    loader = make()
    unit = Unit(0, 1)
    _start(loader, unit)
    unit.save_state(str(tmp_path))
    other = make(N + 5)
    with pytest.raises(ConfigError) as e:
        _start(other, Unit(0, 1, str(tmp_path)))
    assert str(e.value) == (f"{tmp_path / STATE_FILE}: written for a data set of {N} samples "
                            f"but this run has {N + 5}: resume with the data set the checkpoint "
                            "was trained on, or start a new run")


@pytest.mark.parametrize("fairchem_at", [(1, 2), (2, 3), (0, 0)])
def test_state_that_disagrees_with_fairchems_progress_is_one_error(make, tmp_path, fairchem_at):
    """A state file saved at epoch 1 step 3 beside a checkpoint whose own progress says
    otherwise is not from that checkpoint: an error naming both, never silently preferred."""
    loader = make()
    unit = Unit(1, 3)
    _start(loader, unit)
    unit.save_state(str(tmp_path))
    again = make()
    again.batch_sampler.set_epoch_and_start_iteration(*fairchem_at)
    _start(again, Unit(*fairchem_at, str(tmp_path)))
    with pytest.raises(ConfigError) as e:
        iter(again)
    assert str(e.value) == (
        f"{tmp_path / STATE_FILE}: written at epoch 1 step 3 but fairchem's checkpoint resumes "
        f"at epoch {fairchem_at[0]} step {fairchem_at[1]}: the file is not from this "
        "checkpoint; remove it to resume from fairchem's step count alone, or resume from the "
        "checkpoint it was saved with")
