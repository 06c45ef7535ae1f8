"""The reference code (the whole world's step, the code before per-rank step plans:
``sampling/reference.py``, ``estimator/reference.py``) is for tests and benchmarks only: the
loader's path never imports it, and only the modules named here load it, lazily."""

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "mdloader_plugin"
REFERENCE = {"mdloader_plugin.sampling.reference", "mdloader_plugin.estimator.reference"}
# module -> why it may import a reference module (inside a function: never at import time)
LAZY = {"estimator/rankcost.py": "RankCost(job) of a --legacy job"}
AT_IMPORT = {"estimator/reference.py"}  # a reference module itself


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(absolute module, at module level) of every package import in `path`."""
    pkg = ".".join(path.relative_to(PKG.parent).with_suffix("").parts[:-1])
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = pkg.rsplit(".", node.level - 1)[0] if node.level else ""
            mod = ".".join(p for p in (base, node.module or "") if p)
            names = [f"{mod}.{a.name}" for a in node.names] + [mod]
            out += [(n, id(node) in top) for n in names]
        elif isinstance(node, ast.Import):
            out += [(a.name, id(node) in top) for a in node.names]
    return out


def test_only_the_named_modules_import_the_reference():
    found = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).as_posix()
        hits = [(m, top) for m, top in _imports(path) if m in REFERENCE]
        if hits and rel not in REFERENCE:
            found[rel] = any(top for _, top in hits)
    assert set(found) <= set(LAZY) | AT_IMPORT, found
    assert not any(top for rel, top in found.items() if rel in LAZY), found


def test_the_loader_path_does_not_load_the_reference():
    mods = ["mdloader_plugin"] + sorted(
        f"mdloader_plugin.{p.parent.name}.{p.stem}" for d in ("loader", "backends", "store")
        for p in (PKG / d).glob("*.py") if p.stem != "__init__")
    code = ("import sys, importlib\n"
            f"for m in {mods!r}: importlib.import_module(m)\n"
            "from mdloader_plugin.sampling.schedule import Schedule\n"
            "me = Schedule(50, 4, 3, weights=__import__('numpy').ones(50)).planner(1, 12, 25)\n"
            "me.row(0, 0); me.sends(0, 1)\n"
            f"print(sorted(m for m in sys.modules if m in {sorted(REFERENCE)!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=PKG.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
