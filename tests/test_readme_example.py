"""The README's own-training-loop example runs as printed, on 2 real ranks."""

import re

import pytest

from mpirun import ROOT, mdloader, mpirun

pytestmark = [pytest.mark.mpi]


def test_readme_own_loop_example_runs(tmp_path):
    text = (ROOT / "README.md").read_text()
    code = re.search(r"<!-- own-loop -->\n```python\n(.*?)```", text, re.S).group(1)
    script = tmp_path / "my_train.py"
    script.write_text(code)
    data = tmp_path / "mols.bp"
    r = mdloader(1, ["synth", "--kind", "hydragnn", "--num-graphs", "300", "--split",
                     "0.8,0.1,0.1", "--out", str(data)], timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    r = mpirun(2, [script, data], timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    # 240 training graphs on 2 ranks, 32 a rank a step: 4 steps an epoch
    assert re.search(r"epoch 0: 4 steps, backend onesided", r.stdout), r.stdout
    assert "epoch 1: 4 steps" in r.stdout
