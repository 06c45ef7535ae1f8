"""How ``make test`` shares the suite between two pytest-xdist workers (``-n 2 --dist loadgroup``).

Many of the slow tests mostly wait (MPI ranks sleeping past a watchdog's timeout, Slurm polls,
subprocesses importing torch), so two workers overlap one test's waiting with another's work.
Under ``--dist loadgroup`` the tests of one ``xdist_group`` run on one worker, one after the
other; a test without a group may run on either. :func:`group` gives each test the group its
sharing needs, so that nothing runs twice or at the same time as what it must not meet:

- ``shared-jobs-KEY``: every test of every module that uses the shared 4-rank launch of KEY
  (tests/common/shared_jobs.py): each worker has its own session, and a key split between two
  workers would launch twice.
- ``slurm``: the tests marked ``slurm``: one one-node Slurm a session (its slurmctld listens on a
  fixed port) and the recipe jobs submitted to it.
- ``cluster``: the tests marked ``cluster``: two emulated clusters built at once could pick the
  same free subnet (each reads the others' before either writes its own).
- ``module:PATH`` (PATH below tests/, no ``.py``): the tests of a module that use a fixture of
  wider than function scope defined in that module (a data set, a training run, an emulated
  cluster): set up on one worker, once.

Every other test is scheduled on its own. :func:`order` puts the longest units first (the
Slurm, the shared launches, then ``slow``, ``mpi``/``cluster`` tests, then the rest, each in
collection order), so that the last minutes are short tests on both workers rather than one long
launch on one. Serial runs (plain ``pytest``, no ``-n``) are left as they are.
"""

from __future__ import annotations

import pytest

__all__ = ["Schedule", "group", "order"]

WIDE_SCOPES = ("module", "package", "session", "class")


def group(item) -> str | None:
    """The xdist group `item` must run in (module doc), or None when it may run anywhere."""
    mod = getattr(item, "module", None)
    keys = tuple(getattr(mod, "SHARED_JOBS", ()) or ())
    if keys and "job" in item.fixturenames:
        params = getattr(getattr(item, "callspec", None), "params", {})
        key = next((v for v in params.values() if isinstance(v, str) and v in keys), None)
        if key is None and len(keys) == 1:
            key = keys[0]
        if key is not None:
            return f"shared-jobs-{key}"
    if item.get_closest_marker("slurm"):
        return "slurm"
    if item.get_closest_marker("cluster"):
        return "cluster"
    path = item.nodeid.split("::", 1)[0]
    for defs in item._fixtureinfo.name2fixturedefs.values():
        if any(d.scope in WIDE_SCOPES and d.baseid.split("::", 1)[0] == path for d in defs):
            return "module:" + path.removeprefix("tests/").removesuffix(".py")
    return None


def _weight(item, name: str | None) -> int:
    """0 for the longest kind of unit, 3 for the shortest (module doc)."""
    if name is not None and not name.startswith("module:"):
        return 0
    if item.get_closest_marker("slow") or item.get_closest_marker("slurm"):
        return 1
    if item.get_closest_marker("mpi") or item.get_closest_marker("cluster"):
        return 2
    return 3


def order(items: list, names: list) -> list:
    """`items` unit by unit (a group, or one ungrouped test), the heaviest units first, each
    unit's tests in collection order; units of the same weight keep their collection order."""
    units: dict = {}
    for i, (item, name) in enumerate(zip(items, names)):
        key = name if name is not None else ("test", i)
        weight, first, members = units.setdefault(key, [3, i, []])
        units[key][0] = min(weight, _weight(item, name))
        members.append(item)
    return [it for _w, _f, members in sorted(units.values(), key=lambda u: (u[0], u[1]))
            for it in members]


def _suffix(item) -> None:
    """The group as the ``@NAME`` suffix of the test's id, which is how xdist's scheduler reads
    it. xdist 3.8 writes ``item._nodeid``, which pytest 9.2's structured ids no longer read
    (pytest-xdist issue 1386): the tests of a group would be spread over both workers. Here the
    structured id gets the suffix (xdist's own write stays harmless); older pytest: left to
    xdist."""
    name = _group_of(item)
    ident = getattr(item, "_id", None)
    if name is None or not getattr(ident, "names", None) or item.nodeid.endswith(f"@{name}"):
        return
    # the suffix after the parameters, in the last name (xdist reads the group after the last
    # "]"; its reports, rebuilt from the string, show a parametrized one as "[P]@NAME]")
    last = ident.names[-1] + ("" if ident.params is None else f"[{ident.params}]") + f"@{name}"
    item._id = type(ident)(path=ident.path, names=(*ident.names[:-1], last))


def _group_of(item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return None
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


class Schedule:
    """The plugin tests/conftest.py registers; it acts under ``--dist loadgroup`` only (in each
    xdist worker) and leaves serial runs as they are."""

    @pytest.hookimpl(tryfirst=True, specname="pytest_collection_modifyitems")
    def pytest_collection_modifyitems_mark(self, config, items: list) -> None:
        """Each test without an ``xdist_group`` of its own gets the one :func:`group` names
        (before xdist reads the marks)."""
        if not getattr(config.option, "loadgroup", False):
            return
        for item in items:
            name = None if item.get_closest_marker("xdist_group") else group(item)
            if name is not None:
                item.add_marker(pytest.mark.xdist_group(name))
            _suffix(item)

    @pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
    def pytest_collection_modifyitems_order(self, config, items: list) -> None:
        """The heaviest units first, after pytest's own reordering and the deselection (the
        same on every worker, as xdist requires)."""
        if getattr(config.option, "loadgroup", False):
            items[:] = order(items, [_group_of(it) for it in items])
