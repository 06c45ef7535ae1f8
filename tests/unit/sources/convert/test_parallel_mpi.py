"""``mpiexec -n 2 mdloader convert``: the file one process writes, byte for byte, also from
writers side by side (``--writers``); a killed run resumed; a rank SIGKILLed under a launcher
that keeps the job alive ends the job with a line naming it; a second conversion into the same
``--out`` while one runs refuses; bad input: one line, exit 2 on every rank, no output."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from mpirun import MPIEXEC, ROOT, mdloader, mpi_env, mpirun
from test_parallel import bp_contents, write_shards

pytestmark = pytest.mark.mpi
OPTS = ["--split", "0.6,0.2,0.2", "--seed", "5", "--x", "atomic_numbers,forces", "--y", "energy",
        "--quiet"]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    src = tmp_path_factory.mktemp("oc20") / "train"
    write_shards(src, (3, 2, 4))
    serial = src.parent / "serial.bp"
    r = subprocess.run([sys.executable, "-m", "mdloader_plugin", "convert", str(src), "--out",
                        str(serial), *OPTS], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return src, bp_contents(serial)


def test_two_ranks_write_the_serial_file(shards, tmp_path):
    src, ref = shards
    out = tmp_path / "p.bp"
    r = mdloader(2, ["convert", str(src), "--out", str(out), "--part-size", "1", *OPTS],
                 timeout=300)
    assert r.returncode == 0, r.stderr
    assert "on 2 ranks" in r.stdout and r.stdout.count("wrote ") == 1
    assert bp_contents(out) == ref


def test_writers_side_by_side_give_the_serial_graphs_that_every_reader_reads(shards, tmp_path):
    """``--writers 3`` on 3 ranks: a folder of 3 files (each rank writing one while it
    converts) that reads back as the serial file, every variable and attribute byte for byte;
    ``check`` (the store's load and both backends, 2 ranks) and ``plan`` read it as one file."""
    src, ref = shards
    out = tmp_path / "w.bp"
    r = mdloader(3, ["convert", str(src), "--out", str(out), "--part-size", "1", "--writers",
                     "3", *OPTS], timeout=300)
    assert r.returncode == 0, r.stderr
    assert "(3 files read as one)" in r.stdout and r.stdout.count("wrote ") == 1
    assert sorted(os.listdir(out)) == ["mdloader-joined.json", "sub-0000.bp", "sub-0001.bp",
                                       "sub-0002.bp"]
    assert bp_contents(out) == ref and not os.path.exists(f"{out}.parts")
    r = mdloader(2, ["check", str(out), "--label", "trainset"], timeout=300)
    assert r.returncode == 0 and "check ok: 2 ranks" in r.stdout, r.stderr
    r = subprocess.run([sys.executable, "-m", "mdloader_plugin", "plan", str(out), "--ranks",
                        "64", "--ranks-per-node", "4", "--json"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and '"choice"' in r.stdout, r.stderr


def test_killed_run_resumes_with_the_parts_done(shards, tmp_path):
    src, ref = shards
    out = tmp_path / "k.bp"
    args = ["convert", str(src), "--out", str(out), "--part-size", "1", *OPTS]
    r = mpirun(2, [ROOT / "tests" / "mpi_scripts" / "convert_kill.py", "2", *args[1:]],
               timeout=300)
    assert r.returncode != 0 and not out.exists()
    done = sorted(p for p in os.listdir(f"{out}.parts") if p.startswith("part-"))
    assert 2 <= len(done) < 9, done  # the dying rank's 2, and whatever rank 0 finished
    r = mdloader(2, [*args, "--writers", "2"], timeout=300)  # resumed with two writers
    assert r.returncode == 0, r.stderr
    assert f"{len(done)} of 9 parts already done" in r.stderr
    assert bp_contents(out) == ref and not os.path.exists(f"{out}.parts")


def test_killed_rank_ends_the_job_when_the_launcher_keeps_it_alive(shards, tmp_path):
    """Rank 1 SIGKILLed after its first part under ``mpiexec --enable-recovery`` (like ``srun``
    without ``--kill-on-bad-exit``): rank 0 would wait forever for the part rank 1 took; the
    heartbeat ends the job with one line naming rank 1. The parts done are kept and the lock
    died with its holder: the same command, run again, resumes and writes the file."""
    src, ref = shards
    out = tmp_path / "d.bp"
    args = [str(src), "--out", str(out), "--part-size", "1", *OPTS]
    cmd = [MPIEXEC, "--enable-recovery", "-n", "2", sys.executable, "-m", "mpi4py",
           str(ROOT / "tests" / "mpi_scripts" / "convert_kill.py"), "1", "--sigkill", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env=mpi_env({"MDLOADER_CONVERT_TIMEOUT": "5"}))
    text = r.stdout + r.stderr
    assert "rank 1: killing myself" in text, text[-3000:]
    lines = [ln[ln.index("mdloader: error:"):] for ln in text.splitlines()
             if "mdloader: error:" in ln]  # the launcher's banner may share the line
    assert len(lines) == 1 and "[rank 0] rank 1 gave no sign of life for 5 s" in lines[0], \
        text[-3000:]
    assert not out.exists()
    r = subprocess.run([sys.executable, "-m", "mdloader_plugin", "convert", *args],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "parts already done" in r.stderr, r.stderr
    assert bp_contents(out) == ref and not os.path.exists(f"{out}.parts")


def test_second_convert_into_the_same_out_refuses_while_one_runs(shards, tmp_path):
    """A conversion holds OUT.parts (its parts wait for a gate); a second one into the same
    --out on 2 ranks refuses with one line, exit 2, touching nothing; the first then finishes
    with the file one process writes."""
    src, ref = shards
    out, gate = tmp_path / "l.bp", tmp_path / "gate"
    args = [str(src), "--out", str(out), "--part-size", "1", *OPTS]
    first = subprocess.Popen([sys.executable, str(ROOT / "tests" / "mpi_scripts" /
                                                  "convert_hold.py"), str(gate), *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=ROOT, env=mpi_env())
    try:
        plan = tmp_path / "l.bp.parts" / "plan.json"
        for _ in range(1200):  # the first run is past its start (at most 2 min)
            if plan.exists() or first.poll() is not None:
                break
            time.sleep(0.1)
        assert plan.exists(), first.communicate()
        r = mdloader(2, ["convert", *args], timeout=300)
        gate.touch()
        _, err = first.communicate(timeout=300)
    finally:
        gate.touch()
        if first.poll() is None:
            first.kill()
    assert r.returncode == 2, r.stdout + r.stderr
    errors = [ln for ln in r.stderr.splitlines() if "error" in ln]
    assert len(errors) == 1 and f"{out} is being converted by another mdloader convert" \
        in errors[0], r.stderr
    assert first.returncode == 0, err
    assert bp_contents(out) == ref and not os.path.exists(f"{out}.parts")


@pytest.mark.parametrize("writers", [1, 2])
def test_truncated_shard_exit_2_on_every_rank(shards, tmp_path, writers):
    src, _ = shards
    bad = tmp_path / "train"
    bad.mkdir()
    for name in sorted(os.listdir(src)):
        data = (src / name).read_bytes()
        (bad / name).write_bytes(data[:5000] if name.endswith("0002.aselmdb") else data)
    out = tmp_path / "b.bp"
    r = mdloader(2, ["convert", str(bad), "--out", str(out), "--writers", str(writers), *OPTS],
                 timeout=300)
    assert r.returncode == 2, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if "error" in ln]
    assert len(errors) == 1 and "data.0002.aselmdb: truncated LMDB file" in errors[0], r.stderr
    assert not out.exists()
    out.mkdir()
    r = mdloader(2, ["convert", str(src), "--out", str(out), *OPTS], timeout=300)
    assert r.returncode == 2 and r.stderr.count("exists: pass --overwrite") == 1, r.stderr
    if writers > 1:  # more writers than ranks: one line, said once
        r = mdloader(2, ["convert", str(src), "--out", str(tmp_path / "c.bp"), "--writers",
                         "3", *OPTS], timeout=300)
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("--writers 3 needs at least 3 ranks (this run has 2)") == 1
