"""`mdloader rank-cost`: one rank's per-step work for P ranks in one process — its JSON, its
plans equal to the whole-world reference, and bad input as one line with exit 2."""

import json
import subprocess
import sys

import numpy as np
import pytest

from mdloader_plugin.estimator.rankcost import Job, RankCost
from mpirun import ROOT

KEYS = {"ranks", "backend", "datasets", "batch_size", "num_samples", "step_cpu_ms_median",
        "step_cpu_ms_p95", "phases_ms", "bytes_per_sample", "epoch_start_s"}


def _cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "mdloader_plugin", "rank-cost", *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_json_rows(tmp_path):
    out = tmp_path / "rc.json"
    r = _cli("--ranks", "4,64", "--num-samples", 20000, "--batch-size", 8, "--steps", 3,
             "--backend", "collective", "--datasets", 2, "--json", out)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [row["ranks"] for row in rows] == [4, 64]
    for row in rows:
        assert KEYS <= set(row)
        assert set(row["phases_ms"]) == {"plan", "group_pack", "copy", "batch"}
        assert row["backend"] == "collective" and row["datasets"] == 2
        assert row["num_samples"] == 20000 and row["batch_size"] == 8
        assert row["bytes_per_sample"] > 0 and row["step_cpu_ms_median"] > 0


@pytest.mark.parametrize("backend", ["onesided", "collective"])
@pytest.mark.parametrize("weights,datasets,group", [(None, 1, None), ("atoms", 1, None),
                                                    (None, 3, None), (None, 1, 4)])
def test_new_and_legacy_plans_are_the_same(backend, weights, datasets, group):
    kw = dict(batch_size=5, backend=backend, weights=weights, datasets=datasets,
              group_size=group, steps=2)
    new, old = RankCost(Job(16, 3001, **kw)), RankCost(Job(16, 3001, legacy=True, **kw))
    if weights:  # legacy balances over the whole world; both over one window at P <= 16
        assert new.core.balance_window >= 16
    for step in range(new.core.steps_in(1)):
        a, b = new.plan(1, step), old.plan(1, step)
        assert np.array_equal(a.ids, b.ids)
        if backend == "collective":
            assert all(np.array_equal(x, y) for x, y in zip(a.sends(), b.sends()))
    assert new.step(1, 0).keys() == {"plan", "group_pack", "copy", "batch"}


@pytest.mark.parametrize("args,words", [
    (["--ranks", "0"], "--ranks 0"),
    (["--ranks", "8,-2"], "--ranks -2"),
    (["--ranks", "8", "--num-samples", 4, "--drop-last"], "--num-samples 4 < --ranks 8"),
    (["--ranks", "8", "--group-size", 3], "--group-size 3 does not divide --ranks 8"),
    (["--ranks", "4", "--weights", "WEIGHTS"], "--weights has 5 entries"),
])
def test_bad_input_one_line_exit_2(tmp_path, args, words):
    w = tmp_path / "w.npy"
    np.save(w, np.ones(5))
    args = [str(w) if a == "WEIGHTS" else a for a in args]
    if "--num-samples" not in args:
        args += ["--num-samples", 100]
    r = _cli(*args, "--json", tmp_path / "never.json")
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and words in lines[0], r.stderr
    assert not (tmp_path / "never.json").exists()

