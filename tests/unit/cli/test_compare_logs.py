"""`mdloader compare-logs`: table numbers, several runs a log, HydraGNN fallback, errors, PNG."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mdloader_plugin.cli import main
from mdloader_plugin.core.epochlog import format_epoch_line

# (wall_s, data_wait_s) per epoch
MD = [(3.0, 0.3), (2.0, 0.1), (2.5, 0.2)]        # median 2.5, share 0.6 / 7.5 = 8.0%
BASE = [(5.0, 2.0), (4.0, 1.0), (6.0, 2.0), (5.5, 1.5)]  # median 5.25, share 6.5 / 20.5 = 31.7%


def write_log(path, run, loader, backend, epochs, prefix="[rank 0] ", noise=True):
    lines = ["HydraGNN setup ...", "Epoch: 00, Train Loss: 0.9"] if noise else []
    for e, (wall, wait) in enumerate(epochs):
        lines.append(prefix + format_epoch_line(run=run, loader=loader, backend=backend, epoch=e,
                                                wall_s=wall, data_wait_s=wait, steps=10,
                                                samples=640))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def rows_of(out: str) -> dict[str, list[str]]:
    """Table rows keyed by run name (columns split on runs of 2+ spaces)."""
    import re

    lines = [ln for ln in out.splitlines() if ln and not ln.startswith(("note:", "wrote "))]
    return {cells[0]: cells for cells in (re.split(r"\s{2,}", ln) for ln in lines[1:])}


@pytest.fixture
def logs(tmp_path):
    a = write_log(tmp_path / "logs" / "demo-mdloader" / "run.log", "demo-mdloader", "mdloader",
                  "collective", MD)
    b = write_log(tmp_path / "logs" / "demo-hydragnn" / "run.log", "demo-hydragnn", "hydragnn",
                  "-", BASE)
    return a, b


def test_table_numbers_exact(logs, capsys):
    a, b = logs
    assert main(["compare-logs", str(b), str(a)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["run", "loader", "backend"]
    rows = rows_of(out)
    assert rows["demo-hydragnn"] == ["demo-hydragnn", "hydragnn", "-", "4", "5.250", "31.7%",
                                     "1.00x"]
    assert rows["demo-mdloader"] == ["demo-mdloader", "mdloader", "collective", "3", "2.500",
                                     "8.0%", "2.10x"]


def test_run_directory_and_several_runs_in_one_log(tmp_path, capsys):
    log = tmp_path / "both" / "run.log"
    write_log(log, "x", "mdloader", "onesided", MD)
    with log.open("a") as f:  # the baseline appended to the same file, then a repeated epoch 1
        for e, (wall, wait) in enumerate(BASE):
            f.write(format_epoch_line(run="x", loader="hydragnn", backend="-", epoch=e,
                                      wall_s=wall, data_wait_s=wait, steps=1, samples=1) + "\n")
        f.write(format_epoch_line(run="x", loader="mdloader", backend="collective", epoch=1,
                                  wall_s=2.0, data_wait_s=0.1, steps=1, samples=1) + "\n")
    assert main(["compare-logs", str(log.parent)]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert [ln.split()[:4] for ln in lines] == [["x", "mdloader", "onesided,collective", "3"],
                                               ["x", "hydragnn", "-", "4"]]
    assert lines[1].split()[-1] == "0.48x"  # 2.5 / 5.25


def test_hydragnn_lines_without_times_are_counted_and_explained(tmp_path, logs, capsys):
    plain = tmp_path / "logs" / "plain" / "run.log"
    plain.parent.mkdir(parents=True)
    plain.write_bytes(b"".join(b"Epoch: %02d, Train Loss: 0.5, Val Loss: 0.6\n" % e
                               for e in range(5)))
    assert main(["compare-logs", str(logs[0]), str(plain)]) == 0
    out = capsys.readouterr().out
    assert rows_of(out)["plain"] == ["plain", "hydragnn", "-", "5", "n/a", "n/a", "n/a"]
    assert "carry no times" in out


@pytest.mark.parametrize("content, expect", [
    (None, "no such log file"),
    ("INFO nothing here\n", "no MDLOADER-EPOCH lines"),
])
def test_errors_are_one_line_with_exit_2(tmp_path, content, expect):
    log = tmp_path / "bad.log"
    if content is not None:
        log.write_text(content)
    proc = subprocess.run([sys.executable, "-m", "mdloader_plugin", "compare-logs", str(log)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mdloader: error: ") and expect in err[0]
    assert str(log) in err[0]


def test_plot_writes_a_png(logs, tmp_path, capsys):
    png = tmp_path / "plots" / "epochs.png"
    assert main(["compare-logs", *map(str, logs), "--plot", str(png)]) == 0
    data = png.read_bytes()
    assert len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {png}" in capsys.readouterr().out


def test_fairchem_run_directory(tmp_path, capsys):
    run_dir = tmp_path / "runs" / "fairchem" / "fc-mdloader"
    write_log(run_dir / "logs" / "train.log", "fc-mdloader", "mdloader", "collective", MD,
              prefix="2026-01-01 00:00:00 INFO: ")
    assert main(["compare-logs", str(run_dir)]) == 0
    assert rows_of(capsys.readouterr().out)["fc-mdloader"][:5] == [
        "fc-mdloader", "mdloader", "collective", "3", "2.500"]
