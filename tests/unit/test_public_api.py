"""The public API at the top of the package: ``from mdloader_plugin import MDLoader, ...``."""

import subprocess
import sys

import pytest

import mdloader_plugin


def test_public_names_are_the_objects_of_their_modules():
    from mdloader_plugin.core import errors
    from mdloader_plugin.loader.loader import MDLoader
    from mdloader_plugin.mpi.world import World
    from mdloader_plugin.store.shard import ShardStore

    from mdloader_plugin import MDLoader as M, ShardStore as S, World as W  # noqa: I001
    assert (M, S, W) == (MDLoader, ShardStore, World)
    assert mdloader_plugin.MemoryBudgetError is errors.MemoryBudgetError
    assert set(mdloader_plugin.PUBLIC) <= set(mdloader_plugin.__all__)
    assert set(mdloader_plugin.PUBLIC) <= set(dir(mdloader_plugin))


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Loader'"):
        mdloader_plugin.Loader  # noqa: B018


def test_importing_the_package_starts_neither_mpi_nor_torch():
    code = ("import sys, mdloader_plugin; "
            "print(sorted(m for m in ('mpi4py.MPI', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
