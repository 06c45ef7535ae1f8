"""Every import path users had before the package was laid out in layers still works, and
names the same module object as the new path (no second copy of a module's state)."""

import importlib
import subprocess
import sys

import pytest

from mdloader_plugin import _aliases

#: old paths whose module imports upstream HydraGNN's 5.0 layout (``hydragnn.utils.datasets``):
#: checked in a process that imports HydraGNN 5.0 (the venv's own is 3.0)
NEEDS_HYDRAGNN5 = ("integrations.hydragnn.upstream_reader", "integrations.hydragnn.upstream_data")

# old public module -> names that users import from it (from the docs and the old tests)
FACES = {
    "mdloader_plugin.store": ["ShardStore"],
    "mdloader_plugin.loader": ["MDLoader", "EpochStats", "LocalSamples"],
    "mdloader_plugin.batching": ["ColumnCollate", "pyg_collate", "pyg_sample"],
    "mdloader_plugin.sampling": ["DataSets", "get_mix", "MIXES"],
}


@pytest.mark.parametrize("old", sorted(set(_aliases.ALIASES) - set(NEEDS_HYDRAGNN5)))
def test_old_path_is_the_new_module(old):
    mod = importlib.import_module(f"mdloader_plugin.{old}")
    new = importlib.import_module(f"mdloader_plugin.{_aliases.ALIASES[old]}")
    assert mod is new, f"mdloader_plugin.{old} is a copy of {new.__name__}"
    assert mod.__spec__.name == new.__name__  # the module keeps its own spec


@pytest.mark.parametrize("old", sorted(FACES))
def test_old_module_names_come_from_the_package_face(old):
    mod = importlib.import_module(old)
    for name in FACES[old]:
        assert hasattr(mod, name), f"{old}.{name} is gone"


def test_from_import_of_old_paths():
    from mdloader_plugin.world import World  # noqa: F401
    from mdloader_plugin.placement import open_store
    from mdloader_plugin.loader.open import open_store as new_open_store
    from mdloader_plugin.cluster.launch import MPI_ENV  # noqa: F401
    from mdloader_plugin.sampling.base import Mix  # noqa: F401

    assert open_store is new_open_store


def test_old_launcher_paths_are_the_new_modules_under_hydragnn_5():
    from hydragnn_versions import env_for

    code = ("import importlib, sys\n"
            f"for old in {NEEDS_HYDRAGNN5!r}:\n"
            "    new = importlib.import_module('mdloader_plugin._aliases').ALIASES[old]\n"
            "    a = importlib.import_module('mdloader_plugin.' + old)\n"
            "    b = importlib.import_module('mdloader_plugin.' + new)\n"
            "    assert a is b and a.__spec__.name == b.__name__, old\n"
            "from mdloader_plugin.integrations.hydragnn.upstream_data import DistDataset\n"
            "from mdloader_plugin.integrations.hydragnn.upstream.data import DistDataset as D\n"
            "assert DistDataset is D\n"
            "print('OK')\n")
    import os

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, **env_for("5.0")}, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "OK", out.stderr[-2000:]


def test_from_import_of_old_hydragnn_paths():
    from mdloader_plugin.integrations.hydragnn.launcher import main
    from mdloader_plugin.integrations.hydragnn.upstream.launcher import main as new_main
    from mdloader_plugin.integrations.hydragnn.upstream_hooks import FLAGS  # noqa: F401

    assert main is new_main


def test_unknown_old_path_still_fails():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("mdloader_plugin.no_such_module")


def test_renamed_public_names_still_work():
    """Names renamed so each word means one thing (docs/how-it-works.md, Sampler) keep their
    old spelling: the old class, with what it offered."""
    import numpy as np

    from mdloader_plugin.estimator import OnlineCheck, OnlineTrial
    from mdloader_plugin.estimator.calibrate import CalibrationSetup, Plan as CalPlan
    from mdloader_plugin.estimator.timing import Plan
    from mdloader_plugin.sampling.max_atoms import MaxAtomsBatches, MaxAtomsPlan
    from mdloader_plugin.sampling.node_budget import NodeBudgetBatches, NodeBudgetPlan
    from mdloader_plugin.sampling.plan import RankPlanner, StepPlan  # noqa: F401
    from mdloader_plugin.sampling.reference import ReferenceSchedule, world_step
    from mdloader_plugin.sampling.sampler import GlobalSampler, SamplerState
    from mdloader_plugin.sampling.schedule import ResumeState

    assert Plan is CalPlan is CalibrationSetup and SamplerState is ResumeState
    assert OnlineCheck is OnlineTrial
    from mdloader_plugin.sources.convert import column_config, column_layout

    assert column_layout is column_config
    assert NodeBudgetPlan is NodeBudgetBatches and MaxAtomsPlan is MaxAtomsBatches
    assert GlobalSampler is ReferenceSchedule
    old = GlobalSampler(20, 2, 3, seed=1)
    assert np.array_equal(old.plan(0, 1), world_step(old, 0, 1))
    from mdloader_plugin.sampler import GlobalSampler as top  # the flat path before layers

    assert top is GlobalSampler
