"""Replica groups: layout rules, and on real ranks the same bytes for every group size."""

import re

import numpy as np
import pytest

from mdloader_plugin.mpi import groups
from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.sources import synth
from mdloader_plugin.sources.adios import write_graphs
from mpirun import mdloader


def nodes(*per_node):
    return np.repeat(np.arange(len(per_node)), per_node)


@pytest.mark.parametrize("node_of,valid", [
    (nodes(4), [1, 2, 4]),
    (nodes(4, 4), [1, 2, 4, 8]),
    (nodes(6, 6), [1, 2, 3, 6, 12]),
    (nodes(2, 2, 2, 2), [1, 2, 4, 8]),
    (nodes(3, 1), [1, 4]),                       # uneven nodes: inside one, or all
    (np.array([0, 1, 0, 1]), [1, 4]),            # round-robin placement
])
def test_valid_sizes_divide_p_and_follow_nodes(node_of, valid):
    assert groups.valid_sizes(node_of) == valid


@pytest.mark.parametrize("w,words", [
    (3, "group_size 3 does not divide the 8 ranks; with 4 ranks a node choose one of 1, 2, 4, 8"),
    (6, "group_size 6 would split a node across groups; with 4 ranks a node choose one of 1, 2, "
        "4, 12"),
])
def test_bad_size_names_valid_values(w, words):
    node_of = nodes(4, 4) if w == 3 else nodes(4, 4, 4)
    with pytest.raises(ConfigError) as exc:
        groups.check_size(w, node_of)
    assert words in str(exc.value)


def test_unaligned_size_says_why():
    with pytest.raises(ConfigError, match="would split a node across groups"):
        groups.check_size(2, np.array([0, 1, 0, 1]))


@pytest.mark.parametrize("value,parsed", [
    (None, None), ("all", None), (0, None), ("auto", "auto"), ("AUTO", "auto"), (4, 4), ("8", 8),
])
def test_parse(value, parsed):
    assert groups.parse(value) == parsed


@pytest.mark.parametrize("value", [-2, "two", 2.5, True])
def test_parse_rejects(value):
    with pytest.raises(ConfigError, match="group_size"):
        groups.parse(value)


def test_width_is_an_alias_and_disagreement_is_an_error():
    assert groups.from_options({"width": 4}) == 4
    assert groups.from_options({"group_size": "auto", "width": None}) == "auto"
    with pytest.raises(ConfigError, match="disagree"):
        groups.from_options({"group_size": 2, "width": 4})


def test_rows_of_the_plan():
    g = groups.Group(None, 1, 2, np.zeros(2, int), index=1, count=2, world_size=4, owned=False)
    plan = np.arange(12).reshape(4, 3)
    assert g.rows(plan).tolist() == [[6, 7, 8], [9, 10, 11]]
    assert g.world_ranks([0, 1]).tolist() == [2, 3]


@pytest.fixture(scope="module")
def mols(tmp_path_factory):
    path = tmp_path_factory.mktemp("groups") / "m.bp"
    write_graphs(path, {"trainset": list(synth.generate("hydragnn", 11, 0, 103))})
    return path


@pytest.mark.mpi
@pytest.mark.slow
def test_same_bytes_for_every_group_size_4_ranks(mols):
    """W = 1, 2, 4 on 4 ranks: every backend's batches equal W = 1's byte for byte, exactly once;
    with W < P fewer bytes move (one host here, so none cross a node)."""
    r = mdloader(4, ["check", mols, "--batch-size", 5, "--epochs", 1, "--group-size", "1,2,4",
                     "--backends", "onesided,collective"], timeout=400)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    out = r.stdout.strip().splitlines()
    assert out[-1] == ("check ok: 4 ranks, 1 epochs, 103 samples, backends onesided,collective, "
                       "group sizes 1,2,4")
    moved = {}
    for ln in out:
        m = re.match(r"group_size (\d+): (\d+) bytes crossed a node, (\d+) stayed on one", ln)
        if m:
            moved[int(m[1])] = (int(m[2]), int(m[3]))
    assert [moved[w][0] for w in (1, 2, 4)] == [0, 0, 0]  # one host
    assert moved[1][1] == 0 < moved[2][1] < moved[4][1]


@pytest.mark.mpi
@pytest.mark.parametrize("size,words", [
    ("3", "group_size 3 does not divide the 4 ranks; with 4 ranks a node choose one of 1, 2, 4"),
    ("auto", "--group-size: list sizes to check"),
])
def test_bad_group_size_one_line_on_every_rank(mols, size, words):
    r = mdloader(4, ["check", mols, "--batch-size", 4, "--group-size", size], timeout=120)
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("mdloader: error:")]
    assert len(lines) == 1 and words in lines[0], r.stderr[-2000:]
    assert "Traceback" not in r.stderr


def _netns_skip() -> str | None:
    import os
    import shutil
    import subprocess

    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("tc") is None:
        return "needs root and iproute2 (network namespaces)"
    if subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        return "`ip netns` is unavailable"
    return None


@pytest.mark.cluster
@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(_netns_skip() is not None, reason=_netns_skip() or "")
def test_host_local_groups_send_nothing_across_hosts(mols):
    """2 emulated hosts x 2 ranks: with W = 2 (ranks per host) no byte of any step crosses a
    host, with either backend; W = 4 sends some across; both serve the same bytes."""
    import os
    import sys

    from mdloader_plugin.devtools.cluster import Cluster
    from mpirun import ROOT

    with Cluster.up(hosts=2, ranks_per_host=2, rate="1gbit",
                    name=f"g{os.getpid() % 100000:05d}") as cl:
        res = cl.run([sys.executable, "-m", "mpi4py", "-m", "mdloader_plugin", "check", str(mols),
                      "--batch-size", "6", "--group-size", "2,4",
                      "--backends", "onesided,collective"],
                     timeout=600, capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    out = res.stdout.strip().splitlines()
    assert out[-1].startswith("check ok: 4 ranks") and out[-1].endswith("group sizes 2,4")
    crossed = {int(m[1]): int(m[2]) for m in
               (re.match(r"group_size (\d+): (\d+) bytes crossed a node", ln) for ln in out) if m}
    assert crossed[2] == 0 < crossed[4]


def test_one_process_without_mpi_takes_only_w_1():
    from mdloader_plugin.store.shard import ShardStore

    samples = [{"a": np.arange(i + 1)} for i in range(5)]
    store = ShardStore.from_samples(None, samples, 5, group_size=1)
    assert store.group is None and store.local_range == (0, 5)
    with pytest.raises(ConfigError, match="group_size 2 does not divide"):
        ShardStore.from_samples(None, samples, 5, group_size=2)


@pytest.mark.parametrize("multi", [False, True])
def test_read_once_and_copy_fills_byte_identical_stores(mols, multi):
    """replicate=copy (the file read once, blocks broadcast across the 2 groups) gives every rank
    the same records, index and digests as every group reading the file; the file is read once
    in total instead of once per group."""
    from mpirun import mpirun

    # several files: streamed in chunks of 2,000 bytes, equal to the default chunk too
    r = mpirun(4, ["tests/mpi_scripts/replicate_equal.py", mols, 2] +
               (["multi", "chunk=2000"] if multi else []), timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    m = re.search(r"equal ranks=4 W=2 read_bytes=(\d+) copy_bytes=(\d+) distinct_buffers=(\d+)",
                  r.stdout)
    assert m, r.stdout + r.stderr[-2000:]
    read_bytes, copy_bytes, distinct = map(int, m.groups())
    assert copy_bytes * 2 == read_bytes  # once in total, against once per group
    assert distinct == 2                 # two blocks, each held by one rank of each group
