"""One 4-rank mpiexec launch a HydraGNN version (or fairchem) for the modules that train on it.

Starting 4 ranks that import torch, PyG and HydraGNN takes 22-28 s on this 2-core machine
(5.0, measured 2026-12-07), fairchem 23-33 s, more than most of the trainings the tests run. So
the modules that train on 4 ranks share one launch a key instead of starting one each: the key
is a HydraGNN version (``3.0``, ``5.0``, ``main``: its tree first on PYTHONPATH,
:func:`hydragnn_versions.env_for`) or ``fairchem`` (the venv as it is). A module takes part by
defining ``SHARED_JOBS`` (its keys), ``shared_job(key, work)`` (writes its data into the folder
`work` and returns the arguments of its ``_job``, JSON values) and ``_job`` (what its ranks run:
one module's job, in its own folder, one after the other in the same ranks). Its ``job`` fixture
asks the session's :class:`SharedJobs` (the ``shared_jobs`` fixture of tests/conftest.py) for its
result; the first such request of a key launches the jobs of every module whose selected tests
use ``job`` on that key, so a module run alone launches only its own job. Under ``make test``'s
two pytest-xdist workers (each its own session) every test of one key runs on one worker
(tests/common/xdist_schedule.py), so a key still launches once.

A job that fails ends the launch (``-m mpi4py`` aborts every rank): each module sharing it then
fails with the launch's output, whose ``[shared-jobs] begin NAME`` lines say which job ran last.

Run as a script (``python -m mpi4py shared_jobs.py SPEC.json``) it is the launch itself.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

MARK = "[shared-jobs]"


class SharedJobs:
    """The launches of one pytest session, at most one a version (module doc)."""

    def __init__(self, session, tmp_path_factory):
        self.session, self.tmp = session, tmp_path_factory
        self._work: dict = {}  # (version, module file) -> prepared folder and _job arguments
        self._runs: dict = {}  # (version, job name) -> the CompletedProcess of its launch

    def work(self, version: str, module) -> Path:
        """The folder of `module`'s job on `version`, its data written (no launch needed)."""
        key = (version, module.__file__)
        if key not in self._work:
            folder = self.tmp.mktemp(f"{Path(module.__file__).stem}-{version}")
            args = module.shared_job(version, folder)
            self._work[key] = (folder, [str(a) if isinstance(a, Path) else a for a in args])
        return self._work[key][0]

    def result(self, version: str, module) -> dict:
        """`module`'s job on `version` done: ``work`` (its folder) and ``stdout`` (the launch's
        output from its job's begin line to its end line: rank 0's lines in order)."""
        import pytest

        name = _name(module, version)
        if (version, name) not in self._runs:  # not yet launched (or not with the others)
            self._launch(version, module)
        res = self._runs[(version, name)]
        if res.returncode != 0:
            names = sorted(n for (v, n), r in self._runs.items() if r is res)
            pytest.fail(f"the shared {version} launch ({', '.join(names)}) failed "
                        f"(exit {res.returncode}):\n{res.stdout[-3000:]}{res.stderr[-3000:]}")
        out = res.stdout
        begin, end = f"{MARK} begin {name}\n", f"{MARK} end {name}\n"
        if begin not in out or end not in out:
            pytest.fail(f"{name} did not finish in the shared launch:\n{out[-3000:]}")
        return {"work": self.work(version, module),
                "stdout": out[out.index(begin) + len(begin):out.index(end)]}

    def _modules(self, version: str, asking) -> list:
        """The modules whose selected tests use ``job`` on `version` (`asking` among them)."""
        found = {asking.__file__: asking}
        for item in self.session.items:
            mod = getattr(item, "module", None)
            if mod is None or version not in getattr(mod, "SHARED_JOBS", ()):
                continue
            params = getattr(item, "callspec", None)
            if "job" in item.fixturenames and (
                    params is None or version in params.params.values()):
                found.setdefault(mod.__file__, mod)
        return [found[k] for k in sorted(found)]

    def _launch(self, version: str, asking) -> None:
        from hydragnn_versions import env_for
        from mpirun import mpirun

        env = {} if version == "fairchem" else env_for(version)
        mods = [m for m in self._modules(version, asking)
                if (version, _name(m, version)) not in self._runs]
        spec = [{"name": _name(m, version), "module": m.__file__,
                 "cwd": str(self.work(version, m)), "args": self._work[(version, m.__file__)][1]}
                for m in mods]
        path = self.tmp.mktemp(f"shared-jobs-{version}") / "spec.json"
        path.write_text(json.dumps(spec))
        res = mpirun(4, [__file__, path], cwd=path.parent, timeout=600 * len(spec), env=env)
        self._runs.update({(version, s["name"]): res for s in spec})


def _name(module, version: str) -> str:
    return f"{Path(module.__file__).stem}-{version}"


def _run(spec_path: str) -> None:
    """In every rank: each module's ``_job`` in its own folder, one after the other."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    for job in json.loads(Path(spec_path).read_text()):
        name = Path(job["module"]).stem
        spec = importlib.util.spec_from_file_location(name, job["module"])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        here = str(Path(job["module"]).parent)  # its neighbours importable, as for a script
        if here not in sys.path:
            sys.path.append(here)
        spec.loader.exec_module(module)
        os.chdir(job["cwd"])
        comm.Barrier()
        if comm.rank == 0:
            print(f"{MARK} begin {job['name']}", flush=True)
        module._job(*job["args"])
        comm.Barrier()
        if comm.rank == 0:
            print(f"{MARK} end {job['name']}", flush=True)


if __name__ == "__main__":
    _run(sys.argv[1])
