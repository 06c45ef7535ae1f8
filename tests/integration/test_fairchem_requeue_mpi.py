"""Exact requeue of fairchem's atom-capped batches: a run begun on 4 ranks resumes on 2 and on 3
from the loader state in its checkpoint, and the epoch serves every packed graph once; a state of
another data set is one error line and exit 2 on every rank."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mpirun import ROOT, mpirun  # noqa: E402

from mdloader_plugin.integrations.fairchem.requeue import STATE_FILE  # noqa: E402
from mdloader_plugin.sampling.max_atoms import MaxAtomsBatches  # noqa: E402

pytestmark = pytest.mark.mpi
SCRIPT = ROOT / "tests" / "mpi_scripts" / "fairchem_requeue.py"
N = 203
NATOMS = (np.arange(N) * 37) % 90 + 5


@pytest.fixture(scope="module")
def begun(tmp_path_factory):
    ckpt = tmp_path_factory.mktemp("ckpt")
    out = ckpt / "first.json"
    r = mpirun(4, [SCRIPT, "first", "collective", ckpt, out], timeout=150)
    assert r.returncode == 0, r.stderr[-3000:]
    state = json.loads((ckpt / STATE_FILE).read_text())
    assert state["loader"]["world_size"] == 4 and state["loader"]["step"] == 4
    assert state["num_samples"] == N and state["max_atoms"] == 200
    return ckpt, json.loads(out.read_text())


@pytest.mark.parametrize("ranks,backend", [(2, "onesided"), (3, "collective")])
def test_resume_on_other_world_size_serves_each_graph_once(begun, tmp_path, ranks, backend):
    ckpt, first = begun
    out = tmp_path / "rest.json"
    r = mpirun(ranks, [SCRIPT, "rest", backend, ckpt, out], timeout=150)
    assert r.returncode == 0, r.stderr[-3000:]
    rest = json.loads(out.read_text())
    plan = MaxAtomsBatches(NATOMS, 200, 4, seed=7)
    left = plan.num_entries - 4 * 4  # batches not served before the checkpoint
    pad = -left % ranks  # the last step repeats the head of the rest, as fairchem pads
    before, after = first["served"], rest["served"]
    assert len(before) == len(set(before))
    assert not set(before) & set(after), "a graph served before the requeue came back"
    assert set(before) | set(after) == set(range(N)), "a graph was never served"
    assert rest["steps"] == [(left + pad) // ranks] * ranks  # the same steps on every rank
    repeated = len(after) - len(set(after))
    assert (repeated == 0) == (pad == 0) and repeated <= pad * max(200 // 5, 1)
    assert max(first["atoms"] + rest["atoms"]) <= 200  # max_atoms is a cap


def test_resume_with_a_state_of_another_data_set_exits_2(begun, tmp_path):
    ckpt, _ = begun
    r = mpirun(2, [SCRIPT, "rest", "collective", ckpt, tmp_path / "rest.json", "150"],
               timeout=150)
    assert r.returncode == 2, r.stderr[-3000:]
    lines = [ln for ln in r.stderr.splitlines() if "error" in ln]
    assert len(lines) == 2 and all(STATE_FILE in ln and "203 samples" in ln for ln in lines)
