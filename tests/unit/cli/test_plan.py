"""``mdloader plan``: a job sized from the files' metadata before it runs. Its per-rank records,
index and order bytes for the train split match (within 10 %; in fact exactly) what a real
4-rank run of the same file reports (``MDLoader.memory_report`` over the real store, each
backend); its choice is the loader's own ``group_size: auto`` decision; a job that does not fit
exits 1 with what to change; a file that is not in HydraGNN's layout is one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mpirun import ROOT, mpirun

KINDS = ("records_bytes", "index_bytes", "order_bytes", "prefetch_cap_bytes")


def plan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mdloader_plugin", "plan", *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.fixture(scope="module")
def uneven_file(tmp_path_factory):
    """OC20-like slabs (records of very different sizes) in three splits."""
    from mdloader_plugin.sources import synth
    from mdloader_plugin.sources.adios import write_graphs

    g = list(synth.generate("oc20", 4, 0, 230))
    path = tmp_path_factory.mktemp("plan") / "slabs.bp"
    write_graphs(path, {"trainset": g[:190], "valset": g[190:210], "testset": g[210:]})
    return path


@pytest.mark.mpi
@pytest.mark.parametrize("which", ["molecules", "slabs"])
def test_plan_matches_a_four_rank_run(which, split_file, uneven_file):
    # the run serves with the backend the plan chose: the per-rank plan keeps more for the
    # collective backend (its epoch inverse) than for the one-sided one
    path = split_file if which == "molecules" else uneven_file
    p = plan(path, "--ranks", 4, "--ranks-per-node", 4, "--batch-size", 8, "--label",
             "trainset", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    planned = doc["splits"]["trainset"]["per_rank"]
    backend = doc["choice"]["backend"]
    r = mpirun(4, [ROOT / "tests" / "mpi_scripts" / "plan_memory.py", path, 8, backend],
               timeout=240)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    run = json.loads(next(ln for ln in r.stdout.splitlines()
                          if ln.startswith("MEMORY "))[len("MEMORY "):])
    for kind in KINDS:
        assert abs(planned[kind] - run[kind]) <= 0.10 * run[kind], (kind, planned, run)
    total = sum(run[k] for k in KINDS[:3])
    assert abs(sum(planned[k] for k in KINDS[:3]) - total) <= 0.10 * total
    assert planned["records_bytes"] == run["records_bytes"]  # exact: same sharding, same codec


def test_plan_choice_is_group_size_auto(split_file):
    p = plan(split_file, "--ranks", 16, "--ranks-per-node", 4, "--profile", "frontier",
             "--group-size", "auto", "--batch-size", 4, "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert {c["group_size"] for c in doc["step"]} == {1, 2, 4, 8, 16}
    assert {c["backend"] for c in doc["step"]} == {"onesided", "collective"}
    fastest = min(c["predicted_s"] for c in doc["step"] if c["fits"])
    chosen = [c for c in doc["step"] if c["backend"] == doc["choice"]["backend"]
              and c["group_size"] == doc["choice"]["group_size"]]
    assert chosen and chosen[0]["fits"] and chosen[0]["predicted_s"] <= fastest * 1.02 + 1e-12
    assert doc["per_node_bytes"] == 4 * doc["per_rank"]["total_bytes"]
    assert set(doc["splits"]) == {"trainset", "valset", "testset"}
    assert doc["load_s"]["total_s"] > 0 and "assumption" in doc["load_s"]["fs_source"]


def test_plan_that_does_not_fit_says_what_to_change(split_file):
    p = plan(split_file, "--ranks", 2, "--ranks-per-node", 2, "--max-memory-per-rank", "40KiB")
    assert p.returncode == 1, p.stdout + p.stderr
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith("does not fit: the memory budget 40.0 KiB a rank") and \
        "run with at least" in last, last
    p = plan(split_file, "--ranks", 2, "--ranks-per-node", 2, "--max-memory-per-rank", "40KiB",
             "--json")
    doc = json.loads(p.stdout)
    assert p.returncode == 1 and not doc["fits"] and doc["advice"] in last
    assert not any(c["fits"] for c in doc["step"])


def test_plan_on_a_file_not_in_hydragnn_layout(tmp_path):
    import adios2
    import numpy as np

    bad = tmp_path / "plain.bp"
    with adios2.Stream(str(bad), "w") as s:
        s.write("temperature", np.arange(10.0), [10], [0], [10])
    p = plan(bad, "--ranks", 4, "--ranks-per-node", 4)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "HydraGNN" in lines[0], p.stderr


def test_plan_bad_job_shape_is_one_line(split_file):
    p = plan(split_file, "--ranks", 6, "--ranks-per-node", 4)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--ranks 6" in p.stderr


def test_plan_refuses_a_budget_below_the_load_peak(split_file):
    """Records + index fit the budget, the load's peak does not: the job would be killed while
    loading, so the plan says it does not fit (before the load's own check would stop it)."""
    doc = json.loads(plan(split_file, "--ranks", 2, "--ranks-per-node", 2, "--json").stdout)
    steady = doc["per_rank"]["records_bytes"] + doc["per_rank"]["index_bytes"]
    assert doc["load_peak_bytes"] > steady
    budget = (steady + doc["load_peak_bytes"]) // 2
    p = plan(split_file, "--ranks", 2, "--ranks-per-node", 2, "--max-memory-per-rank", budget)
    assert p.returncode == 1, p.stdout + p.stderr
    last = p.stdout.strip().splitlines()[-1]
    assert "below the load's peak" in last and "--index-share node" in last, last
