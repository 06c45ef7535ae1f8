"""The README's first example, pasted as a new user would: its HydraGNN commands run in order, in
a fresh folder laid out like a clone after ``make demo`` (``.venv``, ``recipes/``), and end with
``mdloader compare-logs`` printing both runs."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from docs_blocks import block as docs_block
from mpirun import ROOT


def test_readme_hydragnn_block_names_distinct_runs():
    block = docs_block("README.md", "readme-hydragnn")
    runs = re.findall(r"run_name=(\S+)", block)
    assert len(runs) == len(set(runs)) == 2, block
    cmp_line = next(ln for ln in block.splitlines() if "compare-logs" in ln)
    for run in runs:
        assert f"logs/{run}" in cmp_line


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_readme_hydragnn_commands_run_in_order(tmp_path):
    block = docs_block("README.md", "readme-hydragnn")
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in (".venv", "recipes"):
        (clone / name).symlink_to(ROOT / name)
    # this checkout's package first (the venv may hold another editable copy)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PRTE_", "MDLOADER_"))}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    script = "set -euo pipefail\n" + block
    proc = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=840)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    assert (clone / "data" / "demo.bp").exists()
    rows = [ln.split() for ln in proc.stdout.splitlines() if ln.startswith("gin-demo-")]
    assert [r[:2] for r in rows] == [["gin-demo-hydragnn", "hydragnn"],
                                     ["gin-demo-mdloader", "mdloader"]], proc.stdout[-3000:]
    assert rows[0][-1] == "1.00x" and rows[1][-1].endswith("x")
