"""What a ``pip install`` of the package ships besides ``mdloader_plugin``'s modules: the Hydra
search-path plugin (``hydra_plugins/``, a namespace package Hydra scans) and the fairchem
``loader`` group it points at (docs/fairchem.md, "The loader group from any config"). Read from
pyproject.toml with setuptools' own package finder (a wheel build was checked by hand:
``pip wheel --no-deps --no-build-isolation .`` lists both)."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

from setuptools import find_namespace_packages

ROOT = Path(__file__).resolve().parents[2]
TOOL = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_the_hydra_plugin_is_a_package_of_the_distribution():
    found = find_namespace_packages(str(ROOT), include=TOOL["packages"]["find"]["include"])
    assert "hydra_plugins.mdloader_plugin_searchpath" in found
    assert "mdloader_plugin.integrations.fairchem.conf" in found
    assert not (ROOT / "hydra_plugins" / "__init__.py").exists()  # a namespace shared by plugins


def test_the_loader_group_is_package_data():
    package = "mdloader_plugin.integrations.fairchem.conf"
    folder = ROOT / package.replace(".", "/")
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*.yaml")}
    shipped = {f for f in files for pat in TOOL["package-data"][package] if fnmatch.fnmatch(f, pat)}
    assert shipped == files == {"loader/mdloader.yaml"}


def test_the_plugin_points_at_the_shipped_group():
    from hydra_plugins.mdloader_plugin_searchpath.searchpath import CONF

    assert CONF == "pkg://mdloader_plugin.integrations.fairchem.conf"
