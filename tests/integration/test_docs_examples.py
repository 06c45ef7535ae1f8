"""The documentation's code blocks meant to run (marked ``<!-- test: NAME -->``) run as printed.

The own-training-loop example of docs/own-loop.md runs on 2 real ranks; the `mdloader estimate`
example of docs/commands.md prints the JSON the page says.
"""

import json
import re

import pytest

from mpirun import ROOT, mdloader, mpirun


def block(page: str, name: str) -> str:
    """The fenced code block after ``<!-- test: name -->`` on a docs page."""
    text = (ROOT / "docs" / page).read_text()
    m = re.search(rf"<!-- test: {re.escape(name)} -->\n```\w*\n(.*?)```", text, re.S)
    assert m, f"docs/{page}: no block marked <!-- test: {name} -->"
    return m.group(1)


def test_every_marked_block_is_tested():
    marked = set()
    for md in (ROOT / "docs").rglob("*.md"):
        marked |= set(re.findall(r"^<!-- test: ([\w-]+) -->$", md.read_text(), re.M))
    assert marked == {"own-loop", "estimate", "own-data-fairchem", "own-data-extxyz",
                      "own-data-hydragnn-config", "own-data-hydragnn"}


@pytest.mark.mpi
def test_own_loop_example_runs(tmp_path):
    script = tmp_path / "my_train.py"
    script.write_text(block("own-loop.md", "own-loop"))
    data = tmp_path / "mols.bp"
    r = mdloader(1, ["synth", "--kind", "hydragnn", "--num-graphs", "300", "--split",
                     "0.8,0.1,0.1", "--out", str(data)], timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    r = mpirun(2, [script, data], timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    # 240 training graphs on 2 ranks, 32 a rank a step: 4 steps an epoch
    assert re.search(r"epoch 0: 4 steps, backend onesided", r.stdout), r.stdout
    assert "epoch 1: 4 steps" in r.stdout


def test_estimate_example_prints_the_documented_json():
    argv = block("commands.md", "estimate").split()
    assert argv[0] == "mdloader"
    r = mdloader(1, argv[1:], timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert set(out) == {"choice", "predicted_s"}
    assert set(out["predicted_s"]) == {"onesided", "collective"}
    assert out["choice"] in out["predicted_s"]
