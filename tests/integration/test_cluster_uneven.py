"""Uneven hosts on the emulated cluster (``--ranks-per-host 3,1``): one decision for the job.

Host 0 runs ranks 0-2, host 1 rank 3, so the ranks see nodes of 3 and of 1 rank. With a profile
whose cost model rates one-sided faster for a rank with two node peers and collective faster for a
rank whose every peer is across the network, each rank deciding alone split the job between
backends (the fetch watchdog then aborted it). Rank 0 decides for every rank now (backend and
replica group size), and names the uneven nodes in one warning line.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mdloader_plugin.devtools.cluster import Cluster, ClusterError, check_ranks_per_host
from mdloader_plugin.devtools.cluster.launch import hostfile_text
from mdloader_plugin.estimator.profile import PROFILE_DIR
from test_cluster import MDLOADER, ROOT, SKIP, _name, assert_gone, family_or_skip, needs_netns

SCRIPT = ROOT / "tests" / "mpi_scripts" / "one_decision.py"


def test_ranks_per_host_parsing():
    assert check_ranks_per_host("3,1", 2) == [3, 1]
    assert check_ranks_per_host("2,2", 2) == 2 and check_ranks_per_host(2, 3) == 2
    hosts = [{"hostname": "a"}, {"hostname": "b"}]
    assert hostfile_text(hosts, [3, 1]) == "a slots=3\nb slots=1\n"
    for bad in ("3,1,1", "0", "x", "2,0"):
        with pytest.raises(ClusterError, match=f"--ranks-per-host {bad}: expected"):
            check_ranks_per_host(bad, 2)


def split_profile() -> dict:
    """``local`` with a cheap step and slow Gets across hosts: one-sided is predicted faster for
    a rank with 2 peers on its node (P = 4), collective for a rank with none."""
    doc = json.loads((PROFILE_DIR / "local.json").read_text())
    p = doc["params"]
    p["os.t_step"]["value"], p["coll.t_step"]["value"] = 1e-5, 2e-4
    for key in ("os.t_get_inter", "os.t_flush_inter"):
        p[key]["value"] *= 100
    doc["name"] = "split"
    return doc


@pytest.mark.cluster
@pytest.mark.mpi
@needs_netns
@pytest.mark.timeout(600)
@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_uneven_hosts_run_one_backend(tmp_path, family):
    if SKIP:
        pytest.skip(SKIP)
    family = family_or_skip(family)
    name = _name("u")
    up = subprocess.run([sys.executable, "-m", "mdloader_plugin", "cluster", "up", "--hosts", "2",
                         "--ranks-per-host", "3,1", "--rate", "1gbit", "--name", name],
                        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert up.returncode == 0, up.stderr[-2000:]
    assert "2 hosts x 3,1 ranks" in up.stdout, up.stdout
    cl = Cluster.attach(name)
    try:
        assert cl.host_ranks == [3, 1] and cl.size == 4
        data, prof = tmp_path / "mols.bp", tmp_path / "split.json"
        prof.write_text(json.dumps(split_profile()))
        subprocess.run([MDLOADER, "synth", "--kind", "hydragnn", "--num-graphs", "400", "--out",
                        str(data), "--quiet"], check=True, capture_output=True, timeout=120)
        # 1 MiB a rank fits a quarter of the 400 records (W = 4), not all of them (W = 1)
        res = cl.run([sys.executable, "-m", "mpi4py", str(SCRIPT), str(data), "8", "1MiB"],
                     env={"MDLOADER_PROFILE": str(prof), "MDLOADER_FETCH_TIMEOUT": "20"},
                     timeout=400, capture_output=True, text=True, cwd=ROOT, family=family)
        out = res.stdout + res.stderr
        assert res.returncode == 0, out[-3000:]
        assert "decided W=4,4,4,4 backend=onesided,onesided,onesided,onesided served=400" \
            in res.stdout, out[-3000:]
        warn = [ln for ln in out.splitlines() if "MDLOADER-AGREE" in ln]
        assert len(warn) == 1 and "ranks on the node: ranks 0-2 3; rank 3 1" in warn[0], out
        # a node-shared index on nodes of 3 and 1 ranks: every rank builds it the same way
        # (before: rank 3 alone gathered a private index while ranks 0-2 split a node
        # communicator, MPI_ERR_ARG)
        res = cl.run([sys.executable, "-m", "mpi4py", str(SCRIPT), str(data), "8", "1MiB", "node"],
                     env={"MDLOADER_PROFILE": str(prof), "MDLOADER_FETCH_TIMEOUT": "20"},
                     timeout=400, capture_output=True, text=True, cwd=ROOT, family=family)
        assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
        assert "served=400" in res.stdout, res.stdout[-2000:]
    finally:
        hosts = cl.hosts
        cl.down()
        assert_gone(name, hosts)
