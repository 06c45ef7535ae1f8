"""Every cross-reference in the package's docstrings names something that exists.

A docstring cites code as ``:mod:`.store```, ``:class:`ShardStore```, ``:meth:`Backends.for_step```
(Sphinx's roles, which mkdocstrings and readers follow). After a module moves, a reference written
against the old layout still reads as if it pointed somewhere; this test resolves each one the
way a reader would and lists those that name nothing. The package is read from the source by
griffe (as ``tools/gen_reference.py`` reads it), so nothing is imported.

How a target resolves (``~``/``!`` prefixes and ``title <target>`` forms are stripped first):

- leading dots: relative to the module holding the docstring, as a relative import is
  (``.groups`` in ``store/shard.py`` is ``mdloader_plugin.store.groups``), then its members;
- otherwise, the first that has it: the enclosing class (``:meth:`for_step``` inside
  ``Backends``), the module's namespace (defined or imported there: ``np.ndarray``, ``World``),
  a module below the module's package or one of its parents (``store.shard``), an absolute path
  (``mdloader_plugin.loader.loader.MDLoader``), builtins;
- a name imported from outside the package (``torch.Tensor``, ``MPI.Win``) counts as resolved
  when the outside module exists (its members are not read).
"""

from __future__ import annotations

import builtins
import importlib.util
import re
from pathlib import Path

import griffe

ROOT = Path(__file__).resolve().parents[2]
ROLE = re.compile(r":(mod|class|func|meth|attr|data|exc|obj|const):`([^`]+)`")
EXTERNAL = object()  # a resolved name that lives outside the package


def _load():
    return griffe.load("mdloader_plugin", search_paths=[str(ROOT)], resolve_aliases=False)


def _external(path: str) -> bool:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            if importlib.util.find_spec(".".join(parts[:cut])) is not None:
                return True
        except (ImportError, ValueError):
            continue
    return False


def _member(obj, name: str):
    """``obj``'s member ``name`` (aliases followed; EXTERNAL for a name from outside), or None."""
    if obj is EXTERNAL:
        return EXTERNAL
    if obj.is_alias:
        try:
            obj = obj.final_target
        except (griffe.AliasResolutionError, griffe.CyclicAliasError):
            return EXTERNAL if _external(obj.target_path) else None
    m = obj.members.get(name)
    if m is None and obj.kind.value == "class":  # inherited from a base of the package
        for base in getattr(obj, "resolved_bases", ()):
            m = base.members.get(name) if hasattr(base, "members") else None
            if m is not None:
                break
    if m is not None and m.is_alias:
        try:
            return m.final_target
        except (griffe.AliasResolutionError, griffe.CyclicAliasError):
            return EXTERNAL if _external(m.target_path) else None
    return m


def _chain(obj, parts):
    for p in parts:
        obj = _member(obj, p)
        if obj is None:
            return None
    return obj


def _is_init(module) -> bool:
    """Whether a griffe module is a package's ``__init__`` (relative names start inside it)."""
    return Path(str(module.filepath)).name == "__init__.py"


def _module_of(obj):
    while obj.kind.value != "module":
        obj = obj.parent
    return obj


def resolve(pkg, target: str, where) -> bool:
    """Whether ``target`` (a role's text) names something, read from object ``where``."""
    target = target.strip()
    if "<" in target and target.endswith(">"):
        target = target[target.index("<") + 1:-1]
    target = target.lstrip("~!").removesuffix("()")
    module = _module_of(where)
    if target.startswith("."):
        dots = len(target) - len(target.lstrip("."))
        base = module if _is_init(module) else module.parent
        for _ in range(dots - 1):
            base = base.parent
            if base is None:
                return False
        rest = target.lstrip(".")
        return _chain(base, rest.split(".")) is not None if rest else True
    parts = target.split(".")
    scopes = []
    node = where
    while node.kind.value != "module":  # the enclosing classes, innermost first
        if node.kind.value == "class":
            scopes.append(node)
        node = node.parent
    scopes.append(module)
    pkgs = module if _is_init(module) else module.parent
    while pkgs is not None:  # modules below this module's package and its parents
        scopes.append(pkgs)
        pkgs = pkgs.parent
    for scope in scopes:
        if _chain(scope, parts) is not None:
            return True
    if parts[0] == pkg.name:
        return _chain(pkg, parts[1:]) is not None
    return hasattr(builtins, parts[0]) or _external(target)


def _objects(obj):
    yield obj
    for m in obj.members.values():
        if not m.is_alias and m.kind.value in ("module", "class", "function"):
            yield from _objects(m)


def broken_references(pkg=None) -> list[str]:
    pkg = pkg or _load()
    bad = []
    for obj in _objects(pkg):
        if not obj.docstring:
            continue
        for role, target in ROLE.findall(obj.docstring.value):
            if not resolve(pkg, target, obj):
                bad.append(f"{obj.path}: :{role}:`{target}`")
    return bad


def test_every_docstring_reference_names_something():
    bad = broken_references()
    assert not bad, f"{len(bad)} docstring references name nothing:\n" + "\n".join(bad)


def test_the_resolver_rejects_what_names_nothing():
    pkg = _load()
    shard = pkg["store.shard"]
    assert resolve(pkg, ".budget", shard)
    assert resolve(pkg, "ShardStore.from_file", shard)
    assert resolve(pkg, "~numpy.ndarray", shard)
    assert resolve(pkg, "mdloader_plugin.loader.loader.MDLoader", shard)
    assert not resolve(pkg, ".groups", shard)
    assert not resolve(pkg, "ShardStore.no_such_method", shard)
    assert not resolve(pkg, "no_such_module.Thing", shard)
