"""Bad input gives a one-line DataError naming the file and the key; under MPI every rank exits
non-zero without hanging."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import re

import adios2
import numpy as np
import pytest

from mdloader_plugin.core.errors import DataError
from mdloader_plugin.sources.adios import GraphFile
from mdloader_plugin.sources.writer import write_graphs

from mpirun import MPIEXEC, ROOT, mpi_env


def graphs(n=40):
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        k = 2 + i % 5
        out.append({"x": rng.normal(size=(k, 2)).astype(np.float32),
                    "edge_index": rng.integers(0, k, size=(2, 2 * k)),
                    "y": np.array([float(i)])})
    return out


def handmade(path, *, skip_var=None, skip_attr=None, count_dtype=np.int64, bad_offset=False,
             ndata=None, edge_dtype=np.int64):
    """A HydraGNN-layout file written with plain ADIOS2 calls, with one defect."""
    gs = graphs(10)
    with adios2.Stream(str(path), "w") as out:
        attrs = {"trainset/ndata": np.array(ndata if ndata is not None else len(gs)),
                 "trainset/keys": ["x", "edge_index"], "total_ndata": np.array(len(gs))}
        for key, vdim in (("x", 0), ("edge_index", 1)):
            arrs = [g[key] for g in gs]
            val = np.concatenate(arrs, axis=vdim)
            if key == "edge_index":
                val = val.astype(edge_dtype)
            cnt = np.array([a.shape[vdim] for a in arrs])
            off = np.concatenate([[0], np.cumsum(cnt)[:-1]])
            if bad_offset:
                off[5] += 1
            name = f"trainset/{key}"
            for vname, v in ((name, val), (f"{name}/variable_count", cnt.astype(count_dtype)),
                             (f"{name}/variable_offset", off)):
                if vname != skip_var:
                    v = np.ascontiguousarray(v)
                    out.write(vname, v, list(v.shape), [0] * v.ndim, list(v.shape))
            attrs[f"{name}/variable_dim"] = np.array(vdim)
        for k, v in attrs.items():
            if k != skip_attr:
                out.write_attribute(k, v)
    return path


def read_all(path, label="trainset"):
    with GraphFile(path) as f:
        info = f.info(label)
        return f.read_block(label, 0, info.ndata, info=info)


def assert_one_line(exc, *words):
    msg = str(exc.value)
    assert "\n" not in msg and "\x1b" not in msg, msg  # one plain line (no terminal colours)
    for w in words:
        assert w in msg, (w, msg)


def test_missing_file(tmp_path):
    with pytest.raises(DataError) as e:
        GraphFile(tmp_path / "nope.bp")
    assert_one_line(e, "nope.bp", "no such file")
    assert str(e.value) == (f"{tmp_path / 'nope.bp'}: no such file or directory; check the path "
                            "(create a file with `mdloader synth` or `mdloader convert`)")


@pytest.mark.parametrize("kind", ["text", "empty_dir"])
def test_not_adios(tmp_path, kind):
    path = tmp_path / "fake.bp"
    if kind == "text":
        path.write_text("hello, not ADIOS2\n" * 100)
    else:
        path.mkdir()
    with pytest.raises(DataError) as e:
        read_all(path)
    assert_one_line(e, "fake.bp", "not a readable ADIOS2 file",
                    "is it a .bp file written by HydraGNN or `mdloader`?")
    assert str(e.value).startswith(f"{path}: not a readable ADIOS2 file (")


@pytest.mark.parametrize("defect,key", [
    (dict(skip_var="trainset/edge_index"), "trainset/edge_index"),
    (dict(skip_var="trainset/x/variable_offset"), "trainset/x/variable_offset"),
    (dict(skip_attr="trainset/keys"), "trainset/keys"),
    (dict(skip_attr="trainset/edge_index/variable_dim"), "trainset/edge_index/variable_dim"),
    (dict(count_dtype=np.float64), "trainset/x/variable_count"),
    (dict(edge_dtype=np.float32), "trainset/edge_index"),
    (dict(bad_offset=True), "trainset/x/variable_offset"),
    (dict(ndata=12), "trainset/x/variable_count"),
])
def test_layout_defects(tmp_path, defect, key):
    path = handmade(tmp_path / "bad.bp", **defect)
    with pytest.raises(DataError) as e:
        read_all(path)
    assert_one_line(e, "bad.bp", key)


def test_offsets_past_the_end(tmp_path):
    path = tmp_path / "bad.bp"
    gs = graphs(6)
    write_graphs(path, {"trainset": gs})
    with GraphFile(path) as f:
        info = f.info("trainset")
        info.keys["x"].shape = (3, 2)  # as if the stored array were shorter than the counts
        with pytest.raises(DataError) as e:
            f.read_block("trainset", 0, 6, info=info)
    assert_one_line(e, "bad.bp", "trainset/x", "past the end")


def truncated(tmp_path):
    path = tmp_path / "trunc.bp"
    write_graphs(path, {"trainset": graphs(400)})
    data = path / "data.0"
    os.truncate(data, os.path.getsize(data) // 2)
    return path


def test_truncated_data_subfile(tmp_path):
    with pytest.raises(DataError) as e:
        read_all(truncated(tmp_path))
    assert_one_line(e, "trunc.bp", "truncated")
    assert re.fullmatch(r".*/trunc\.bp: data subfiles hold \d+ bytes but the variables need \d+; "
                        r"the file is truncated \(was a copy or a write interrupted\?\)",
                        str(e.value)), str(e.value)


def test_slightly_truncated_never_hangs(tmp_path):
    """A cut within the format's slack is not caught at open; the read deadline ends it within
    its timeout with one line naming the file and the variable (a native thread says it: the
    reader holds the GIL, no Python code can run)."""
    path = tmp_path / "trunc.bp"
    write_graphs(path, {"trainset": graphs(400)})
    data = path / "data.0"
    os.truncate(data, os.path.getsize(data) - 64)
    code = ("from mdloader_plugin.sources.adios import GraphFile\n"
            f"f = GraphFile({str(path)!r}); f.read_block('trainset', 0, 400)\n")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "MDLOADER_READ_TIMEOUT": "3"})
    wall = time.monotonic() - t0
    assert r.returncode == 3 and 3 <= wall < 45, (r.returncode, wall, r.stderr[-2000:])
    assert re.fullmatch(r"mdloader: error: \S*/trunc\.bp: reading 'trainset/\S+' \(start .*\) "
                        r"did not complete in 3 s; the file is truncated or its file system "
                        r"stalled: aborting the job \(MDLOADER_READ_TIMEOUT sets the limit\)\n",
                        r.stderr), r.stderr[-2000:]


@pytest.mark.parametrize("value, want", [("0", 0.0), ("0.5", 0.5), ("", 600.0)])
def test_read_timeout_0_is_off(tmp_path, monkeypatch, value, want):
    """``MDLOADER_READ_TIMEOUT=0`` arms no deadline (as ``MDLOADER_FETCH_TIMEOUT=0``), a
    fraction of a second is taken as given, a bad value names the variable."""
    from mdloader_plugin.core.errors import ConfigError
    from mdloader_plugin.core import deadline
    from mdloader_plugin.sources import adios

    monkeypatch.setenv("MDLOADER_READ_TIMEOUT", value)
    assert adios._read_timeout() == want
    path = tmp_path / "ok.bp"
    write_graphs(path, {"trainset": graphs(10)})
    armed = []
    monkeypatch.setattr(deadline, "arm", lambda seconds, line: armed.append(seconds))
    monkeypatch.setattr(deadline, "cancel", lambda: None)
    with GraphFile(path) as f:
        assert f.read_block("trainset", 0, 10).stop == 10
    assert (not armed) if want == 0 else set(armed) == {want}
    monkeypatch.setenv("MDLOADER_READ_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match="MDLOADER_READ_TIMEOUT='soon' is not a number"):
        adios._read_timeout()


def test_empty_label(tmp_path):
    from mdloader_plugin.store.shard import ShardStore

    path = tmp_path / "empty.bp"
    write_graphs(path, {"trainset": graphs(5), "valset": []})
    with GraphFile(path) as f:
        assert f.info("valset").ndata == 0 and not f.info("valset").keys
    with pytest.raises(DataError) as e:
        ShardStore.from_file(None, str(path), label="valset")
    assert_one_line(e, "empty.bp", "valset")
    with pytest.raises(DataError) as e:
        ShardStore.from_file(None, str(path), label="testset")
    assert_one_line(e, "empty.bp", "testset")


def test_writer_rejects_inconsistent_graphs(tmp_path):
    gs = graphs(3)
    gs[2]["x"] = gs[2]["x"].astype(np.float64)
    with pytest.raises(DataError) as e:
        write_graphs(tmp_path / "w.bp", {"trainset": gs})
    assert_one_line(e, "trainset/x", "graph 2")
    assert not (tmp_path / "w.bp").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".mdloader-spool")]


@pytest.mark.mpi
@pytest.mark.parametrize("bad, words", [
    ("missing", ["missing.bp: no such file or directory; check the path"]),
    ("text", ["text.bp: not a readable ADIOS2 file", "written by HydraGNN or `mdloader`?"]),
    ("truncated", ["trunc.bp: data subfiles hold", "the file is truncated"]),
    ("no_var", ["novar.bp", "trainset/edge_index"]),
])
def test_check_cli_fails_on_every_rank(tmp_path, bad, words):
    """``mdloader check`` on a bad file under mpiexec: one line (said once, by rank 0) naming the
    file and the key, and every rank exits 2 by itself (no abort, no hang)."""
    if bad == "missing":
        path = tmp_path / "missing.bp"
    elif bad == "text":
        path = tmp_path / "text.bp"
        path.write_text("not adios\n")
    elif bad == "truncated":
        path = truncated(tmp_path)
    else:
        path = handmade(tmp_path / "novar.bp", skip_var="trainset/edge_index")
    each = (f'"{sys.executable}" -m mdloader_plugin check "$0" --batch-size 2; '
            'echo "rank $OMPI_COMM_WORLD_RANK exit $?"')
    r = subprocess.run([MPIEXEC, "-n", "2", "sh", "-c", each, str(path)], capture_output=True,
                       text=True, timeout=90, env=mpi_env(), cwd=ROOT)
    assert sorted(ln for ln in r.stdout.splitlines() if ln.startswith("rank ")) == [
        "rank 0 exit 2", "rank 1 exit 2"], r.stdout[-2000:] + r.stderr[-3000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"mdloader: error: {path}"), r.stderr[-3000:]
    assert "\x1b" not in lines[0] and "Traceback" not in r.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
