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
    p = 48 if weights else 16  # weights: past one window, owners place ids by their blocks
    new, old = RankCost(Job(p, 3001, **kw)), RankCost(Job(p, 3001, legacy=True, **kw))
    if weights:  # legacy deals the whole world's step; here its whole-table scan, our blocks
        assert (old.schedule.balance_window, old.schedule.balance_columns) == (p, 5)
        old.schedule.balance_window = new.schedule.balance_window
        old.schedule.balance_columns = new.schedule.balance_columns
    for step in range(new.schedule.steps_in(1)):
        a, b = new.plan(1, step), old.plan(1, step)
        assert np.array_equal(a.ids, b.ids)
        if backend == "collective":
            assert all(np.array_equal(x, y) for x, y in zip(a.sends, b.sends))
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



# -- --sizes: record sizes from a file ----------------------------------------------------------
FIX = ("give HydraGNN-layout .bp file(s), a .npy of integers or a text file of one integer a "
       "line")


@pytest.mark.parametrize("backend", ["onesided", "collective"])
def test_sizes_make_the_index_and_the_bytes_moved(backend):
    sizes = np.array([800, 4096, 100_000, 12_008, 3_000, 56], dtype=np.int64)
    rc = RankCost(Job(8, sizes.size * 7, batch_size=4, backend=backend, steps=2, sizes=sizes))
    assert rc.index.total_bytes() == int(np.tile(sizes, 7).sum())
    ids = rc.plan(1, 0).ids
    assert np.array_equal(rc.index.nbytes[ids], sizes[ids % sizes.size])
    assert rc.step(1, 0).keys() == {"plan", "group_pack", "copy", "batch"}  # 100 kB records
    exact = RankCost(Job(8, sizes.size, sizes=sizes, steps=1))
    assert exact.index.total_bytes() == int(sizes.sum())


def test_sizes_from_a_bp_file_are_its_records(tmp_path):
    from mdloader_plugin.cli.rank_cost import read_sizes
    from mdloader_plugin.loader.open import _record_sizes
    from mdloader_plugin.sources import synth
    from mdloader_plugin.sources.adios import write_graphs

    g = list(synth.generate("oc20", 4, 0, 40))
    path = tmp_path / "slabs.bp"
    write_graphs(path, {"trainset": g[:30], "valset": g[30:]})
    sizes = read_sizes([str(path)])
    assert np.array_equal(sizes, _record_sizes(str(path), "trainset", None, ()))
    assert read_sizes([str(path)], "valset").size == 10
    rc = RankCost(Job(4, sizes.size, sizes=sizes, steps=1))
    assert rc.index.total_bytes() == int(sizes.sum())
    out = tmp_path / "rc.json"
    r = _cli("--ranks", "2,4", "--sizes", path, "--batch-size", 4, "--steps", 2, "--json", out)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(row["num_samples"], row["sizes"]) for row in rows] == [(30, "file")] * 2
    assert rows[0]["record_bytes_mean"] == pytest.approx(sizes.mean())


def test_sizes_tiled_says_so_once(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("3000\n4096\n\n5000\n")
    r = _cli("--ranks", "4,8", "--sizes", f, "--num-samples", 1000, "--batch-size", 4,
             "--steps", 2)
    assert r.returncode == 0, r.stderr[-2000:]
    said = [ln for ln in r.stdout.splitlines() if "tiled" in ln]
    assert said == [f"rank-cost: {f} holds 3 sizes for --num-samples 1000: tiled: sample i has "
                    "size i mod 3"]


@pytest.mark.parametrize("name,content,line", [
    ("nope.npy", None, "--sizes {f}: no such file; " + FIX),
    ("neg.npy", [30, 0, 5], "--sizes {f}: size 0 at entry 1 is not positive; a record size is "
                            "a number of bytes >= 1"),
    ("neg.txt", "30\n-4\n", "--sizes {f}: size -4 at entry 1 is not positive; a record size "
                            "is a number of bytes >= 1"),
    ("empty.npy", [], "--sizes {f}: holds no sizes; " + FIX),
    ("half.npy", [1.5, 2.0], "--sizes {f}: holds float64 values, not integers; " + FIX),
    ("words.txt", "abc\n12\n", "--sizes {f}: not readable (could not convert string 'abc' to "
                               "float64 at row 0, column 1.); " + FIX),
])
def test_bad_sizes_one_line_exit_2(tmp_path, name, content, line):
    f = tmp_path / name
    if isinstance(content, str):
        f.write_text(content)
    elif content is not None:
        np.save(f, np.array(content, dtype=np.int64 if all(
            float(x).is_integer() for x in content) else np.float64))
    r = _cli("--ranks", "4", "--sizes", f, "--json", tmp_path / "never.json")
    assert r.returncode == 2
    assert r.stderr.splitlines() == ["mdloader: error: " + line.format(f=f)]
    assert not (tmp_path / "never.json").exists()


# -- --profile-out: the collective model's per-rank CPU constants --------------------------------
def test_profile_out_prices_estimates_plan_term(tmp_path):
    from mdloader_plugin.estimator import Workload, get_model, get_profile
    from mdloader_plugin.estimator.rank_cost_fit import fit_rows

    prof_path, rows_path = tmp_path / "fitted.json", tmp_path / "rows.json"
    r = _cli("--ranks", "4,64,512", "--num-samples", 20000, "--batch-size", 8, "--steps", 3,
             "--backend", "collective", "--profile", "perlmutter", "--profile-out", prof_path,
             "--json", rows_path)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(rows_path.read_text())["rows"]
    t_id, t_count, _ = fit_rows(rows)  # the fit of the rows written, redone
    base, fitted = get_profile("perlmutter"), get_profile(str(prof_path))
    assert (fitted.params["coll.t_plan_id"], fitted.params["coll.t_count"]) == (t_id, t_count)
    assert {k: v for k, v in fitted.params.items() if k not in ("coll.t_plan_id", "coll.t_count")} \
        == {k: v for k, v in base.params.items() if k not in ("coll.t_plan_id", "coll.t_count")}
    assert fitted.sources["coll.t_count"].startswith("rank-cost: plan + group_pack CPU a step")
    assert fitted.provenance["rank_cost"]["job"]["ranks"] == "4,64,512"
    w = Workload(8192, 32, 4000.0, 0.0, 8)
    model = get_model("collective")
    assert model.terms(w, fitted.params)["plan"] == t_id * 32 + t_count * 8192
    # a profile without coll.t_count prices P at coll.t_plan_id, as before
    assert base.sources["coll.t_count"].startswith("not in the profile")
    assert model.terms(w, base.params)["plan"] == base.params["coll.t_plan_id"] * (32 + 8192)
    est = {}
    for prof in ("perlmutter", prof_path):
        e = subprocess.run([sys.executable, "-m", "mdloader_plugin", "estimate", "--profile",
                            str(prof), *map(str, ["--ranks", 8192, "--ranks-per-node", 8,
                                                  "--batch-size", 32, "--sample-bytes", 4000]),
                            "--json"], cwd=ROOT, text=True, capture_output=True, timeout=120)
        assert e.returncode == 0, e.stderr
        est[prof] = json.loads(e.stdout)["predicted_s"]["collective"]
    change = model.terms(w, fitted.params)["plan"] - model.terms(w, base.params)["plan"]
    assert est[prof_path] - est["perlmutter"] == pytest.approx(change, rel=1e-9)


@pytest.mark.parametrize("args,line", [
    (["--ranks", "16"], "--profile-out fits a + b P: give at least two world sizes in --ranks "
                        "(got 16), e.g. --ranks 64,8192"),
    (["--ranks", "4,8", "--backend", "onesided"],
     "--profile-out fits the collective backend's coll.t_plan_id and coll.t_count of today's "
     "code: run with --backend collective (and without --legacy)"),
])
def test_profile_out_bad_input_one_line_exit_2(tmp_path, args, line):
    args = ["--backend", "collective", *args] if "--backend" not in args else args
    r = _cli(*args, "--num-samples", 1000, "--profile-out", tmp_path / "p.json")
    assert r.returncode == 2
    assert r.stderr.splitlines() == ["mdloader: error: " + line]
    assert not (tmp_path / "p.json").exists()
