"""The benchmark harness: every loader serves the same graphs, and the report states the targets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpirun import ROOT, mpi_env

BENCH = ROOT / "bench"


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.timeout(900)  # with the real-DDStore rows; minutes on a loaded 2-core machine
def test_loaders_side_by_side_serve_the_same_graphs(tmp_path: Path):
    out = tmp_path / "loaders.json"
    r = subprocess.run([sys.executable, "-m", "bench.loaders.compare", "--ranks", "2", "--batches",
                        "4,32", "--datasets", "hydragnn", "--graphs", "300", "--steps", "2",
                        "--repeats", "1", "--out", str(out), "--no-figures"],
                       capture_output=True, text=True, timeout=600, env=mpi_env(), cwd=ROOT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    names = {row["loader"] for row in rows}
    real = {"ddstore-real", "ddstore-real-fabric"} if _pyddstore() else set()
    assert names == {"auto", "collective", "onesided", "ddstore", "file", "preload",
                     "pyg-local"} | real
    for row in rows:
        assert row["steps"] >= 1 and row["step_median_s"] > 0 and row["floor_s"] > 0
        if row["loader"] != "pyg-local":
            assert row["same_batches"] is True, row["loader"]
    assert all(row["fetch_median_s"] is not None for row in rows if row["loader"] != "pyg-local")


def _pyddstore() -> bool:
    """Real-DDStore rows appear only where tools/build_ddstore.sh built pyddstore."""
    import importlib.util

    return importlib.util.find_spec("pyddstore") is not None


def _row(loader: str, step: float, fetch: float, batch: int = 64) -> dict:
    return {"dataset": "hydragnn", "ranks": 2, "batch": batch, "loader": loader,
            "step_median_s": step, "fetch_median_s": fetch, "floor_s": 0.001,
            "fetch_over_floor": fetch / 0.001, "step_over_floor": step / 0.001,
            "data_pss_mib": 10.0, "dataset_bytes": 2**20, "peak_rss_mib": 300.0}


def test_targets_table_says_met_or_not():
    from bench import report

    rows = [_row("auto", 0.010, 0.002), _row("onesided", 0.010, 0.002),
            _row("collective", 0.020, 0.004), _row("ddstore", 0.200, 0.150),
            _row("file", 0.050, 0.040)]
    lines = report.targets({"rows": rows}, None)
    text = "\n".join(lines)
    assert "DDStore-style at batch ≥ 32, one host | step (batch ready): 20.0x" in text
    assert "| yes |" in lines[2]              # 20x vs DDStore-style
    assert lines[3].endswith("| fetch only |")  # 5x vs file-per-sample, 20x on fetch alone
    assert "fetch ≤ 3x memcpy floor" in lines[4] and lines[4].endswith("| yes |")  # 2x the floor
    assert "auto within 2%" in lines[5] and lines[5].endswith("| yes |")
    assert "per-rank memory" in lines[6] and lines[6].endswith("| yes |")


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_gpu_rate_reports_every_loader_and_step_time(tmp_path: Path):
    """The GPU-rate consumer runs every kind of loader (MDLoader, PyG in memory with a worker,
    HydraGNN's, the real DDStore where built) at a 0 and a 2 ms step on 2 ranks; shares are
    fractions, the loader alone waits for almost all of its wall time, the figure is drawn."""
    out, fig = tmp_path / "gpu_rate.json", tmp_path / "gpu_rate.png"
    names = ["auto", "pyg-nw2", "hydragnn"] + (["ddstore-real"] if _pyddstore() else [])
    r = subprocess.run([sys.executable, "-m", "bench.gpu.rate", "--ranks", "2",
                        "--datasets", "hydragnn", "--batches", "32", "--graphs", "128",
                        "--step-ms", "0,2", "--steps", "3", "--repeats", "1",
                        "--loaders", ",".join(names), "--out", str(out), "--figure", str(fig)],
                       capture_output=True, text=True, timeout=600, env=mpi_env(), cwd=ROOT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert {(row["loader"], row["step_ms"]) for row in rows} == {
        (n, ms) for n in names for ms in (0.0, 2.0)}
    for row in rows:
        assert 0 <= row["wait_share_mean"] <= row["wait_share_max"] <= 1, row
        assert row["samples_per_s"] > 0 and row["gil_ms"] == 0.25 * row["step_ms"]
        if row["step_ms"] == 0:
            assert row["wait_share_max"] > 0.5, row  # nothing else to do but wait
    assert fig.stat().st_size > 0


@pytest.mark.mpi
@pytest.mark.slow
def test_dataset_scale_bench_reduced(tmp_path: Path):
    """bench/scale/dataset.py at a reduced size (the bench runs 2e7): every configuration's
    index equals the full one, the torch order's plan equals the pre-#19 table's, the compact
    index and feistel order take less per sample, and the formula matches the measurement."""
    from bench.scale import dataset as dataset_scale

    out = tmp_path / "scale.json"
    r = subprocess.run([sys.executable, "-m", "bench.scale.dataset", "--samples", "30011",
                        "--ranks", "2", "--tmp", str(tmp_path / "data"), "--out", str(out)],
                       capture_output=True, text=True, timeout=900, env=mpi_env(), cwd=ROOT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    res = json.loads(out.read_text())
    rows = {row["config"]: row for row in res["rows"]}
    assert set(rows) == set(dataset_scale.CONFIGS) and res["torch_plan_equals_before"]
    assert all(row["index_equal_full"] for row in rows.values())
    n = 30011
    assert rows["before"]["index_bytes"] >= 16 * n and rows["before"]["order_bytes"] >= 8 * n
    assert rows["after"]["index_bytes"] < 10 * n and rows["after"]["order_bytes"] < 2**18
    assert rows["after-shared"]["index_bytes"] < rows["after"]["index_bytes"] * 0.6
    for row in rows.values():
        f = dataset_scale.formula(row, n, row["ranks"], row["local_size"])
        assert abs(f["index"] - row["index_bytes"]) <= 64 + 0.001 * f["index"], row["config"]
        assert f["order"] == row["order_bytes"], row["config"]
    assert {e["samples"] for e in res["extrapolated"]} == {10**8, 10**9}
    assert (BENCH / "results").exists() and out.with_suffix(".md").exists()


def test_scale_step_and_regression_tables(tmp_path: Path):
    """bench/scale/step.py (one process, tiny) measures every index kind and order at every
    batch; bench/scale/regression.py compares runs cell by cell (a run against itself:
    1.00)."""
    step = tmp_path / "step.json"
    r = subprocess.run([sys.executable, "-m", "bench.scale.step", "--rounds", "1",
                        "--sizes", "4096", "--out", str(step)], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(step.read_text())["rows"]
    kinds = {(row["what"], row["kind"], row["B"]) for row in rows}
    assert kinds == {(w, k, b) for b in (4, 32, 256) for w, k in [
        ("index lookup", "full"), ("index lookup", "compact K=1"),
        ("index lookup", "compact K=64"), ("plan", "torch"), ("plan", "feistel")]}
    assert all(row["us_per_step"] > 0 for row in rows)
    loaders = BENCH / "results" / "loaders.json"
    out = tmp_path / "reg"
    r = subprocess.run([sys.executable, "-m", "bench.scale.regression", "--pre",
                        str(loaders), "--cur", str(loaders), "--step", str(step), "--out",
                        str(out)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(out.with_suffix(".json").read_text())["loaders"]
    assert summary["ratios"] and set(summary["ratios"].values()) == {1.0}
    assert "| 4,096 | 32 |" in out.with_suffix(".md").read_text()


def test_scale_regression_ab_mode_and_collective_step_cpu(tmp_path: Path):
    """--ab reads ABBA runs (pre_<i>/cur_<i>) and the step-CPU runs of each tree: the same run
    as both trees gives 1.00; bench/scale/collective_step_cpu.py measures a positive cost."""
    loaders = BENCH / "results" / "loaders.json"
    (tmp_path / "pre_1.json").write_text(loaders.read_text())
    (tmp_path / "cur_2.json").write_text(loaders.read_text())
    for t in ("pre", "cur"):
        r = subprocess.run([sys.executable, "-m", "bench.scale.collective_step_cpu",
                            "--graphs", "256", "--steps", "50", "--rounds", "1", "--out",
                            str(tmp_path / f"cpu_{t}_1.json")], capture_output=True, text=True,
                           timeout=120, cwd=ROOT)
        assert r.returncode == 0, r.stderr[-3000:]
    out = tmp_path / "reg"
    r = subprocess.run([sys.executable, "-m", "bench.scale.regression", "--ab",
                        str(tmp_path), "--out", str(out)], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads((tmp_path / "reg_ab.json").read_text())
    assert got["loaders"] and {v["best_ratio"] for v in got["loaders"].values()} == {1.0}
    assert got["cpu"]["256"]["pre_us"][0] > 0
    assert "| 256 |" in (tmp_path / "reg_ab.md").read_text()


def test_scale_regression_statistics():
    """The before/after tables' test statistics: the exact two-sided Mann-Whitney p of fully
    separated runs is 2 / C(8, 4), of identical runs 1; the Hodges-Lehmann shift is the median
    of the pairwise differences; the normal approximation takes over for large samples."""
    from bench.scale.regression import hodges_lehmann, mann_whitney

    assert mann_whitney([1, 2, 3, 4], [5, 6, 7, 8]) == (16.0, pytest.approx(2 / 70))
    assert mann_whitney([5, 6, 7, 8], [1, 2, 3, 4]) == (0.0, pytest.approx(2 / 70))
    assert mann_whitney([1.0, 2.0], [1.0, 2.0])[1] == pytest.approx(1.0)
    assert hodges_lehmann([1, 2], [3, 5]) == 2.5
    u, p = mann_whitney(list(range(30)), [x + 100 for x in range(30)])
    assert u == 900 and p < 1e-9
