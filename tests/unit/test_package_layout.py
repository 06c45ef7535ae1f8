"""The package's layout is its architecture (docs/how-it-works.md, Layers): one layer a folder,
imports pointing down (the layer list that opens ``mdloader_plugin/__init__.py``), module sizes
bounded, PyG only where it belongs. Read from the code's own imports
(every import, function-local ones too), so a change that breaks a rule fails here."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "mdloader_plugin"

def _layers() -> dict[str, int]:
    """Layer -> height, bottom 0, from the list that opens ``mdloader_plugin/__init__.py`` (the
    one statement of the layers; docs/how-it-works.md repeats it); ``devtools`` sits on ``mpi``
    (it imports ``core`` and ``mpi`` at most), the ``hydragnn`` entry point above everything."""
    doc = ast.get_docstring(ast.parse((PKG / "__init__.py").read_text()))
    block = doc.split("::", 1)[1].strip("\n").split("\n\n")[0]
    top_down = [ln.split()[0].rstrip("/") for ln in block.splitlines()]
    heights = {name: h for h, name in enumerate(reversed(top_down))}
    heights.update(devtools=heights["mpi"], hydragnn=len(top_down))
    return heights


LAYERS = _layers()


def _rank(layer: str) -> int | None:
    return LAYERS.get(layer)


def test_the_layer_list_names_every_folder():
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(LAYERS), folders ^ set(LAYERS)


def _modules():
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _layer(path: Path) -> str | None:
    rel = path.relative_to(PKG).parts
    return rel[0] if len(rel) > 1 else None


def _imported_layers(path: Path) -> set[tuple[str, int]]:
    """(layer, line) of every package import in `path`, relative or absolute."""
    tree = ast.parse(path.read_text(), str(path))
    pkg_parts = path.relative_to(PKG.parent).with_suffix("").parts[:-1]
    out = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg_parts[:len(pkg_parts) - node.level + 1]
                mod = (*base, *(node.module.split(".") if node.module else ()))
                names = [mod] if node.module else [(*mod, a.name) for a in node.names]
            elif node.module:
                names = [tuple(node.module.split("."))]
        elif isinstance(node, ast.Import):
            names = [tuple(a.name.split(".")) for a in node.names]
        for mod in names:
            if len(mod) >= 2 and mod[0] == "mdloader_plugin":
                out.add((mod[1], node.lineno))
    return out


def test_imports_point_down():
    wrong = []
    for path in _modules():
        mine = _layer(path)
        if mine is None:  # the package's own top files (faces, aliases, entry point)
            continue
        assert _rank(mine) is not None, f"{path}: folder {mine!r} is not in LAYERS"
        for layer, line in _imported_layers(path):
            rank = _rank(layer)
            if rank is not None and rank > _rank(mine):
                wrong.append(f"{path.relative_to(PKG.parent)}:{line} ({mine}) imports {layer}")
    assert not wrong, "imports pointing up:\n" + "\n".join(sorted(wrong))


@pytest.mark.parametrize("limit, paths", [
    (300, ["loader/loader.py"]),
    (450, None),
])
def test_module_sizes(limit, paths):
    files = [PKG / p for p in paths] if paths else _modules()
    big = [f"{p.relative_to(PKG.parent)}: {n} lines" for p in files
           if (n := len(p.read_text().splitlines())) > limit]
    assert not big, f"over {limit} lines:\n" + "\n".join(big)


def test_pyg_only_in_batching_pyg_and_integrations():
    # and the converter that reads PyG's own saved data sets (an input format, imported only
    # when `mdloader convert` is asked for it)
    allowed = {PKG / "batching" / "pyg.py", PKG / "sources" / "convert" / "pyg.py"}
    found = []
    for path in _modules():
        if _layer(path) == "integrations" or path in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(m.split(".")[0] == "torch_geometric" for m in mods):
                found.append(f"{path.relative_to(PKG.parent)}:{node.lineno}")
    assert not found, "torch_geometric imported outside batching/pyg.py and integrations/: " \
        + ", ".join(found)


def test_no_mpi_below_the_mpi_layer():
    """``core``, ``records``, ``sampling`` and ``sources`` never import MPI (the package doc)."""
    found = []
    for path in _modules():
        if _layer(path) not in ("core", "records", "sampling", "sources"):
            continue
        found += [f"{path.relative_to(PKG.parent)}:{line}"
                  for layer, line in _imported_layers(path) if layer == "mpi"]
        for node in ast.walk(ast.parse(path.read_text())):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(m.split(".")[0] == "mpi4py" for m in mods):
                found.append(f"{path.relative_to(PKG.parent)}:{node.lineno}")
    assert not found, "MPI imported below the mpi layer: " + ", ".join(sorted(found))


MAX_COLUMNS = 100  # setup.cfg's [flake8] max-line-length
CHECKED = ("mdloader_plugin", "tests", "bench", "tools")


def _tracked_python() -> list[Path]:
    """The tracked ``*.py`` files of the folders flake8's limit holds for (every ``*.py`` under
    them when git or the checkout is not there, as in an unpacked sdist)."""
    root = PKG.parent
    try:
        out = subprocess.run(["git", "ls-files", "--", *(f"{d}/*.py" for d in CHECKED)],
                             cwd=root, capture_output=True, text=True)
    except OSError:
        out = None
    if out is None or out.returncode != 0:
        return sorted(p for d in CHECKED for p in (root / d).rglob("*.py")
                      if "__pycache__" not in p.parts)
    return [root / name for name in out.stdout.splitlines()]


def test_no_line_over_100_columns():
    long = [f"{p.relative_to(PKG.parent)}:{i} ({len(line)} columns)"
            for p in _tracked_python() if p.is_file()
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if len(line) > MAX_COLUMNS]
    assert not long, f"over {MAX_COLUMNS} columns:\n" + "\n".join(long)
