"""make test's two pytest-xdist workers (tests/common/xdist_schedule.py): what shares a launch, the
Slurm or a module's fixtures runs on one worker; the rest may run on either."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

COMMON = Path(__file__).resolve().parents[1] / "common"

CONFTEST = """
import xdist_schedule

def pytest_configure(config):
    config.pluginmanager.register(xdist_schedule.Schedule(), "mdloader-xdist-schedule")
"""

# Every test records the worker it ran on (and the module fixture the number of its set-ups).
RECORD = """
import json, os, time
from pathlib import Path
import pytest

OUT = Path(os.environ["RECORD_DIR"])

def record(request, **extra):
    time.sleep(0.2)  # long enough that ungrouped tests spread over both workers
    name = request.node.name.split("@")[0]
    (OUT / f"{request.module.__name__}-{name}.json").write_text(
        json.dumps({"worker": os.environ["PYTEST_XDIST_WORKER"], **extra}))
"""

SHARED = RECORD + """
SHARED_JOBS = ("k",)

@pytest.fixture(scope="module")
def job():
    return "done"

@pytest.mark.parametrize("i", range(4))
def test_shared(job, request, i):
    record(request, group="k")
"""

MODULE = RECORD + """
@pytest.fixture(scope="module")
def data():
    with open(OUT / "setups", "a") as f:
        f.write("x")
    return 1

@pytest.mark.parametrize("i", range(4))
def test_uses_module_fixture(data, request, i):
    record(request, group="module")

@pytest.mark.slurm
@pytest.mark.parametrize("i", range(3))
def test_slurm(request, i):
    record(request, group="slurm")

@pytest.mark.parametrize("i", range(8))
def test_free(request, i):
    record(request, group=None)
"""


def test_groups_stay_on_one_worker_and_free_tests_use_both(tmp_path):
    pytest.importorskip("xdist")
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    slurm: one Slurm\n")
    for name in ("test_shared_a", "test_shared_b"):
        (suite / f"{name}.py").write_text(SHARED)
    (suite / "test_module.py").write_text(MODULE)
    out = tmp_path / "out"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not gwN's
    env.update(RECORD_DIR=str(out),
               PYTHONPATH=os.pathsep.join([str(COMMON), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
                        "-rA", "-p", "no:cacheprovider", str(suite)],
                       cwd=suite, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    runs = [json.loads(p.read_text()) for p in out.glob("*.json")]
    assert len(runs) == 4 + 4 + 4 + 3 + 8, r.stdout[-3000:]
    for group in ("k", "module", "slurm"):
        workers = {x["worker"] for x in runs if x["group"] == group}
        assert len(workers) == 1, (group, runs)
    assert (out / "setups").read_text() == "x"  # the module fixture set up once
    assert {x["worker"] for x in runs} == {"gw0", "gw1"}  # two workers were used
    # the reports name a grouped test by its id and its group, after its parameters
    assert "test_shared_a.py::test_shared[0]@shared-jobs-k" in r.stdout, r.stdout[-3000:]
