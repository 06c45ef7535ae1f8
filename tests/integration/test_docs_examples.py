"""The documentation's code blocks meant to run (marked ``<!-- test: NAME -->``) run as printed.

The own-training-loop example of docs/own-loop.md runs on 2 real ranks with the page's own
commands; the `mdloader estimate` example of docs/commands.md prints the JSON the page says.
(tests/integration/test_docs_commands.py checks that every marked block is read by a test.)
"""

import json
import re
import subprocess

import pytest

from docs_blocks import block
from mpirun import ROOT, mdloader, mpi_env
from test_docs_commands import substituted


@pytest.mark.mpi
def test_own_loop_example_runs(tmp_path):
    (tmp_path / "my_train.py").write_text(block("own-loop.md", "own-loop"))
    # the page's commands, on 2 ranks (test_docs_commands.SIZES)
    script = substituted(block("own-loop.md", "own-loop-run"))
    assert "mpiexec -n 2 python my_train.py data/mols.bp" in script, script
    env = mpi_env({"PYTHONPATH": str(ROOT)})  # the venv's python and mpiexec first on PATH
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    # 1,600 training graphs on 2 ranks, 32 a rank a step: 25 steps an epoch
    assert re.search(r"epoch 0: 25 steps, backend onesided", r.stdout), r.stdout
    assert "epoch 1: 25 steps" in r.stdout


def test_estimate_example_prints_the_documented_json():
    argv = block("commands.md", "estimate").split()
    assert argv[0] == "mdloader"
    r = mdloader(1, argv[1:], timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert set(out) == {"choice", "predicted_s"}
    assert set(out["predicted_s"]) == {"onesided", "collective"}
    assert out["choice"] in out["predicted_s"]
