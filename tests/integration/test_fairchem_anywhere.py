"""fairchem: ``loader: mdloader`` found from any config, and the fairchem internals MDLoader calls.

The ``loader`` group ships inside the package (``mdloader_plugin/integrations/fairchem/conf``)
and reaches Hydra's search path through MDLoader's search-path plugin
(``hydra_plugins/mdloader_plugin_searchpath``). fairchem 2.24 composes a ``.yml`` config from a
copy in a temporary folder, so a ``loader/`` folder beside it is never seen: the one line must
work with nothing beside the config. A ``loader/`` folder beside a ``.yaml`` config is searched
first and wins (the plugin appends). The same ``.yml`` config also trains, in the 4-rank launch
the fairchem modules share (tests/common/shared_jobs.py), through the launcher ``mdloader train
fairchem`` uses.

fairchem-core ships no config files in its wheel (no ``.yml``/``.yaml`` in 2.24.0's RECORD), so
the config here is the recipe's (``recipes/fairchem/cpu.yaml``, which selects the group with
the one line) saved as a ``.yml`` in a folder of its own.

The second half checks, against the installed fairchem-core, each internal the integration calls
(docs/fairchem.md, "fairchem internals"): the names, the signatures and the behaviour relied on.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fairchem.core")

from checks import check  # noqa: E402
from mpirun import ROOT  # noqa: E402

CPU = ROOT / "recipes" / "fairchem" / "cpu.yaml"
GROUP = ROOT / "mdloader_plugin" / "integrations" / "fairchem" / "conf" / "loader" / "mdloader.yaml"
TARGET = "mdloader_plugin.integrations.fairchem.loader.build_loader"


@pytest.fixture(autouse=True)
def _checkout_first(monkeypatch):
    """Hydra finds plugins in the ``hydra_plugins`` namespace on sys.path: this checkout's."""
    monkeypatch.syspath_prepend(str(ROOT))


def _yml(folder: Path, name: str = "my-run.yml") -> Path:
    """The recipe as a ``.yml`` config in `folder`, nothing beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(CPU.read_text())
    return path


def _compose(config: Path, overrides=()):
    from fairchem.core._cli import get_hydra_config_from_yaml

    return get_hydra_config_from_yaml(str(config), ["data_dir=/data/x", *overrides])


def test_a_yml_config_alone_in_its_folder_finds_the_group(tmp_path):
    cfg = _compose(_yml(tmp_path / "anywhere"))
    assert sorted(p.name for p in (tmp_path / "anywhere").iterdir()) == ["my-run.yml"]
    train, val = cfg.runner.train_dataloader, cfg.runner.eval_dataloader
    assert train._target_ == TARGET and val._target_ == TARGET
    assert (train.path, train.label, val.label) == ("/data/x/oc20.bp", "trainset", "valset")
    assert cfg.runner.callbacks[1].loader == "mdloader"  # ${loader.name}


def test_the_groups_options_work_on_the_command_line(tmp_path):
    cfg = _compose(_yml(tmp_path), ["loader.backend=collective", "loader.prefetch=0"])
    assert cfg.runner.train_dataloader.backend == "collective"
    assert cfg.runner.train_dataloader.prefetch == 0


def test_a_loader_folder_beside_a_yaml_config_wins(tmp_path):
    """The plugin appends the shipped group: the user's own ``loader/mdloader.yaml`` comes first."""
    (tmp_path / "loader").mkdir()
    (tmp_path / "loader" / "mdloader.yaml").write_text(
        GROUP.read_text().replace("name: mdloader ", "name: mine     ", 1))
    config = tmp_path / "cfg.yaml"
    config.write_text(CPU.read_text())
    assert _compose(config).runner.callbacks[1].loader == "mine"
    # and the multi-data-set recipe's own group (its `datasets:`) over the shipped one
    multi = _compose(ROOT / "recipes" / "fairchem" / "multi" / "cpu.yaml")
    assert "datasets" in multi.runner.train_dataloader


# --- the fairchem internals the integration calls, against the installed version -------------

def test_get_hydra_config_from_yaml_as_the_launcher_calls_it(tmp_path, monkeypatch):
    """launch.build_config: (path, overrides) -> the canonical config, the forced LOCAL mode and
    the pinned ``timestamp_id`` applied, ``job.metadata`` filled in; a ``.yml`` is composed from a
    copy in another folder (why the group ships in the package), a ``.yaml`` where it lies."""
    import hydra
    from fairchem.core import _cli

    assert list(inspect.signature(_cli.get_hydra_config_from_yaml).parameters) == \
        ["config_yml", "overrides_args"]
    dirs = []
    real = hydra.initialize_config_dir
    monkeypatch.setattr(hydra, "initialize_config_dir",
                        lambda config_dir, **kw: dirs.append(config_dir) or real(config_dir, **kw))
    forced = ["++job.scheduler.mode=LOCAL", "++job.scheduler.num_nodes=1",
              "++job.scheduler.ranks_per_node=2", "++job.timestamp_id=pinned",
              f"job.run_dir={tmp_path / 'runs'}"]
    yml = _yml(tmp_path / "a")
    cfg = _compose(yml, forced)
    assert cfg.job.timestamp_id == "pinned" and cfg.job.scheduler.ranks_per_node == 2
    assert cfg.job.scheduler.mode.name == "LOCAL"
    assert cfg.job.metadata.log_dir.startswith(str(tmp_path / "runs" / "pinned"))
    assert cfg.job.metadata.config_path.startswith(str(tmp_path / "runs" / "pinned"))
    yaml = tmp_path / "b" / "cfg.yaml"
    yaml.parent.mkdir()
    yaml.write_text(CPU.read_text())
    _compose(yaml, forced)
    assert dirs[0] != str(yml.parent) and dirs[1] == str(yaml.parent)


def test_runner_wrapper_takes_the_config_alone():
    """launch._train calls ``runner_wrapper(cfg)`` on every rank (training: the shared job)."""
    from fairchem.core.launchers.slurm_launch import runner_wrapper

    params = list(inspect.signature(runner_wrapper).parameters.values())
    assert params[0].name == "config"
    assert all(p.default is not inspect.Parameter.empty for p in params[1:])


def _atomic_data():
    from mdloader_plugin.integrations.fairchem.data import ToAtomicData

    rng = np.random.default_rng(0)
    sample = {"pos": rng.random((3, 3)), "atomic_numbers": np.array([1, 8, 1]),
              "cell": 5 * np.eye(3).reshape(1, 3, 3), "pbc": np.ones((1, 3), bool),
              "fixed": np.zeros(3, np.int64), "tags": np.zeros(3, np.int64),
              "energy": np.array([-1.5]), "forces": rng.random((3, 3)),
              "stress": np.arange(6.0).reshape(1, 6)}
    return ToAtomicData.build(sample)


def test_datasets_utils_rename_data_object_keys():
    """data.ToAtomicData: ``key_mapping`` renames a field, a list of names copies it."""
    import torch
    from fairchem.core.datasets._utils import rename_data_object_keys

    assert list(inspect.signature(rename_data_object_keys).parameters) == \
        ["data_object", "key_mapping"]
    data = _atomic_data()
    energy, forces = data.energy.clone(), data.forces.clone()
    out = rename_data_object_keys(data, {"energy": "oc20_energy", "forces": ["f1", "f2"]})
    assert "energy" not in out.keys() and torch.equal(out.oc20_energy, energy)
    assert torch.equal(out.f1, forces) and torch.equal(out.f2, forces)


def test_modules_transforms_and_atomic_data():
    """data.ToAtomicData: ``DataTransforms(config)`` runs ``common_transform`` (sets ``dataset``);
    ``AtomicData`` takes the fields ToAtomicData.build passes (Voigt stress from ASE as 3x3)."""
    from fairchem.core.datasets.atomic_data import AtomicData
    from fairchem.core.modules.transforms import DataTransforms

    data = DataTransforms({"common_transform": {"dataset_name": "oc20"}})(_atomic_data())
    assert isinstance(data, AtomicData) and data.dataset == "oc20"
    assert data.stress.shape == (1, 3, 3) and float(data.stress[0, 1, 2]) == 3.0  # Voigt yz
    assert tuple(data.cell.shape) == (1, 3, 3) and int(data.natoms) == 3


def test_mlip_unit_what_the_loader_and_the_requeue_callback_rely_on():
    """loader.FairchemMDLoader: fairchem restores (epoch, start_iter) through
    ``batch_sampler.set_epoch_and_start_iteration``; requeue.LoaderStateCallback wraps
    ``save_state(checkpoint_location)`` and reads ``lazy_state_location`` and
    ``train_progress``; the groups collate with ``mt_collater_adapter(tasks)``."""
    from fairchem.core.units.mlip_unit import mlip_unit

    assert "set_epoch_and_start_iteration" in inspect.getsource(mlip_unit.set_sampler_state)
    unit = mlip_unit.MLIPTrainEvalUnit
    assert list(inspect.signature(unit.save_state).parameters) == ["self", "checkpoint_location"]
    source = inspect.getsource(unit)
    assert "self.lazy_state_location = checkpoint_location" in source
    assert "self.train_progress.num_steps_completed_in_epoch" in source
    assert list(inspect.signature(mlip_unit.mt_collater_adapter).parameters)[0] == "tasks"


# --- the .yml config trained on MPI ranks ----------------------------------------------------

def _job(config: str, data: str, runs_dir: str) -> None:
    from mdloader_plugin.integrations.fairchem.launch import run

    code = run(config, [f"data_dir={data}", f"job.run_dir={runs_dir}", "job.run_name=yml",
                        "max_epochs=1"])
    check(code == 0, f"run yml exited {code}")


SHARED_JOBS = ("fairchem",)  # in the 4-rank launch the fairchem modules share


def shared_job(key: str, work: Path) -> list:
    """The data, and the ``.yml`` config alone in a folder of its own (tests/common/
    shared_jobs.py)."""
    from mdloader_plugin.integrations.fairchem.data import write_oc20_like

    write_oc20_like(str(work / "oc20"), num_train=48, num_val=16, seed=2)
    return [_yml(work / "configs"), work / "oc20", work / "runs"]


@pytest.fixture(scope="module")
def job(shared_jobs, request):
    return shared_jobs.result("fairchem", request.module)


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_yml_config_trains_on_mpi_ranks(job):
    from mdloader_plugin.core.epochlog import parse_epoch_lines

    assert sorted(p.name for p in (job["work"] / "configs").iterdir()) == ["my-run.yml"]
    log = job["work"] / "runs" / "yml" / "logs" / "train.log"
    recs = parse_epoch_lines(log.read_text().splitlines())
    assert [r["epoch"] for r in recs] == [0] and recs[0]["loader"] == "mdloader"
    assert recs[0]["steps"] > 0 and recs[0]["samples"] > 0


if __name__ == "__main__":
    _job(*sys.argv[1:4])
