"""The emulated multi-node cluster: real MPI across network namespaces, and clean teardown.

Jobs run under Open MPI and, where the MPICH wheel is installed, under MPICH (Cray MPICH's
family: ``ch4:ofi`` over libfabric's tcp provider, ``devtools/cluster/launch.py``). Under MPICH
the cheapest job that covers the same ground runs: one ``mdloader check`` with both backends,
``auto`` (its online trial) and replica groups 2 and 4; the blocked-target Gets, and a killed rank.

Needs root and ``ip netns`` (CI runs as root); skipped otherwise. Every cluster here has a name
unique to this pytest process so parallel sessions on one machine do not collide.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mdloader_plugin.devtools.cluster import STATE_ROOT, Cluster, ClusterError, netns
from mdloader_plugin.estimator import Workload, get_profile, predict

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "tests" / "common" / "cluster_probe.py"
MDLOADER = str(Path(sys.executable).parent / "mdloader")


def _netns_usable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "needs iproute2 (ip, tc)"
    if subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        return "`ip netns` is unavailable"
    return None


SKIP = _netns_usable()
needs_netns = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")


def _name(tag: str) -> str:
    return f"{tag}{os.getpid() % 100000:05d}"


def assert_gone(name: str, hosts: list[dict]) -> None:
    nss, links = netns.orphans(name)
    assert not nss and not links, f"left behind: {nss + links}"
    assert not netns.leftovers([h["ns"] for h in hosts], [h["veth"] for h in hosts])
    assert not (STATE_ROOT / name).exists()


@pytest.fixture(scope="module")
def cluster():
    if SKIP:
        pytest.skip(SKIP)
    cl = Cluster.up(hosts=2, ranks_per_host=2, rate="1gbit", name=_name("c"))
    try:
        yield cl
    finally:
        hosts = cl.hosts
        cl.down()
        assert_gone(cl.name, hosts)


def family_or_skip(family: str) -> str:
    from mdloader_plugin.devtools.cluster import launch

    try:
        return launch.check_family(family)
    except ClusterError as e:
        pytest.skip(str(e))


def veth_bytes(cl) -> int:
    return sum(int(Path(f"/sys/class/net/{h['veth']}/statistics/{d}_bytes").read_text())
               for h in cl.hosts for d in ("tx", "rx"))


@pytest.mark.cluster
@pytest.mark.mpi
@needs_netns
@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_hosts_rma_alltoallv(cluster, family):
    """Ranks see two hostnames; RMA Get and Alltoallv move the right bytes across hosts, and
    the bytes between hosts cross the links (MPICH's default UCX netmod took shared memory)."""
    before = veth_bytes(cluster)
    res = cluster.run([sys.executable, "-m", "mpi4py", str(PROBE), "2000000"], timeout=180,
                      capture_output=True, text=True, cwd=ROOT, family=family_or_skip(family))
    assert res.returncode == 0, res.stderr[-3000:]
    assert veth_bytes(cluster) - before > 2 * 2_000_000  # the timed Send, out and in
    hosts_line = next(line for line in res.stdout.splitlines() if line.startswith("hosts"))
    assert cluster.hosts[0]["hostname"] in hosts_line
    assert cluster.hosts[1]["hostname"] in hosts_line
    assert "probe ok" in res.stdout


@pytest.mark.cluster
@pytest.mark.mpi
@pytest.mark.slow
@needs_netns
@pytest.mark.timeout(600)
def test_check_both_backends_across_hosts(cluster, tmp_path):
    """`mdloader check` (exactly-once, byte-identical) over 2 emulated hosts x 2 ranks."""
    data = tmp_path / "mols.bp"
    subprocess.run([MDLOADER, "synth", "--kind", "hydragnn", "--num-graphs", "400", "--out",
                    str(data), "--quiet"], check=True, capture_output=True, timeout=120)
    res = cluster.run([sys.executable, "-m", "mpi4py", "-m", "mdloader_plugin", "check",
                       str(data), "--batch-size", "8", "--epochs", "1",
                       "--backends", "onesided,collective"],
                      timeout=500, capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip().splitlines()[-1].startswith("check ok: 4 ranks")


@pytest.mark.cluster
@pytest.mark.mpi
@needs_netns
@pytest.mark.timeout(600)
def test_mpich_check_backends_auto_and_groups_across_hosts(cluster, tmp_path):
    """Under MPICH, one `mdloader check` over 2 hosts x 2 ranks: one-sided Gets and Alltoallv
    across hosts, `auto` with its online trial, replica groups of 2 (nothing crosses a host)
    and 4; exactly-once and byte-identical for each."""
    family = family_or_skip("mpich")
    data = tmp_path / "mols.bp"
    subprocess.run([MDLOADER, "synth", "--kind", "hydragnn", "--num-graphs", "400", "--out",
                    str(data), "--quiet"], check=True, capture_output=True, timeout=120)
    res = cluster.run([sys.executable, "-m", "mpi4py", "-m", "mdloader_plugin", "check",
                       str(data), "--batch-size", "8", "--epochs", "1", "--group-size", "2,4",
                       "--backends", "onesided,collective,auto"], family=family,
                      timeout=500, capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    out = res.stdout.strip().splitlines()
    assert out[-1] == ("check ok: 4 ranks, 1 epochs, 400 samples, backends "
                       "onesided,collective,auto, group sizes 2,4"), out[-3:]
    assert "group_size 2: 0 bytes crossed a node" in res.stdout
    assert "MDLOADER-BACKEND" in res.stderr and "ranks span 2 nodes" in res.stderr


@pytest.mark.cluster
@pytest.mark.mpi
@needs_netns
@pytest.mark.timeout(300)
@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_killed_rank_ends_the_job_across_hosts(cluster, family):
    """A rank of host 1 SIGKILLed mid-epoch (collective backend, its peers in Alltoallvs and a
    trainer allreduce across hosts): the launcher ends the whole job."""
    family = family_or_skip(family)
    t0 = time.monotonic()
    res = cluster.run([sys.executable, "-m", "mpi4py", "tests/mpi_scripts/rank_kill.py",
                       "collective", "3", "3", "allreduce"], family=family, timeout=200,
                      capture_output=True, text=True, cwd=ROOT)
    out = res.stdout + res.stderr
    assert "rank 3: killing myself at step 3" in out, out[-3000:]
    assert res.returncode != 0 and "outlived a dead rank" not in out, out[-3000:]
    assert time.monotonic() - t0 < 150


@pytest.mark.cluster
@pytest.mark.mpi
@needs_netns
def test_down_ends_running_job_and_removes_everything():
    """`down` while a job runs kills it (mpiexec exits), and leaves no namespace or link."""
    with Cluster.up(hosts=2, ranks_per_host=1, rate="100mbit", name=_name("d")) as cl:
        hosts = cl.hosts
        job = subprocess.Popen(cl.mpiexec_argv() + ["sleep", "120"], env=cl.env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not all(cl.processes().values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert all(cl.processes().values()), "the job never reached both hosts"
    try:
        job.wait(timeout=30)
    finally:
        if job.poll() is None:
            job.kill()
    assert_gone(cl.name, hosts)


@pytest.mark.cluster
@needs_netns
def test_failed_up_leaves_nothing_behind(monkeypatch):
    """An `up` that fails half-way (after host 1 exists) removes everything it made; a later
    `down` finds nothing."""
    name = _name("f")
    real = netns.create_host

    def create_then_fail(host, *args):
        real(host, *args)
        if host["ns"].endswith("-h1"):
            raise ClusterError("injected failure after creating host 1")

    monkeypatch.setattr(netns, "create_host", create_then_fail)
    with pytest.raises(ClusterError, match="injected"):
        Cluster.up(hosts=3, ranks_per_host=1, rate="1gbit", name=name)
    assert_gone(name, netns.names_for(name, 3)["hosts"])
    assert Cluster.down_by_name(name) == []
    out = subprocess.run([MDLOADER, "cluster", "down", "--name", name], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "nothing to remove" in out.stdout


@pytest.mark.cluster
@needs_netns
def test_up_refuses_to_reuse_existing_names():
    """A link already named like the cluster's is not taken over (nor deleted) by `up`."""
    name = _name("s")
    squatter = netns.names_for(name, 1)["bridge"]
    netns.sh("ip", "link", "add", squatter, "type", "bridge")
    try:
        with pytest.raises(ClusterError, match="leftovers"):
            Cluster.up(hosts=1, ranks_per_host=1, rate="1gbit", name=name)
        assert netns.link_exists(squatter)
    finally:
        netns.sh("ip", "link", "del", squatter, check=False)
    assert not (STATE_ROOT / name).exists()


def test_not_root_is_one_line_error(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ClusterError, match="needs root"):
        netns.preflight()


@pytest.mark.parametrize("argv, words", [
    (["up", "--hosts", "2", "--ranks-per-host", "1", "--rate", "fast"], "--rate 'fast'"),
    (["up", "--hosts", "2", "--ranks-per-host", "1", "--name", "Bad-Name"], "cluster name"),
    (["up", "--hosts", "0", "--ranks-per-host", "1"], "--hosts 0"),
    (["run", "--name", "zz9"], "give the command after --"),
])
def test_cli_errors_are_one_line(argv, words):
    out = subprocess.run([MDLOADER, "cluster", *argv], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mdloader: error:") and words in lines[0]


def test_rate_parsing():
    assert netns.parse_rate("1gbit") == 10**9
    assert netns.parse_rate("100mbit") == 10**8
    assert netns.parse_rate("unlimited") is None
    with pytest.raises(ClusterError):
        netns.parse_rate("1gb")


@pytest.mark.parametrize("bits, limit", [(10**8, 16 * 2**20), (10**9, 10**9 // 8)])
def test_links_queue_rather_than_drop(bits, limit):
    """A 50 ms tbf queue dropped 10^5 packets a minute under the benchmarks' all-to-all traffic
    (TCP timeouts, steps 2-4x slower); the queue holds a second of traffic, at least 16 MB."""
    args = netns.tbf_args(bits)
    assert args[args.index("rate") + 1] == f"{bits}bit"
    assert int(args[args.index("limit") + 1]) == limit and "latency" not in args


def test_ranks_yield_only_when_the_emulated_hosts_oversubscribe_this_machine(monkeypatch):
    """Every emulated host claims its R slots, so Open MPI would busy-poll; more ranks than
    cores must yield, or a spinning rank starves the peer it waits for (seconds-long stalls)."""
    from mdloader_plugin.devtools.cluster import launch

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    argv = launch.mpiexec_argv(Path("agent.sh"), Path("hostfile"), "10.0.0.0/24", 6, "mpiexec")
    i = argv.index("mpi_yield_when_idle")
    assert argv[i - 1] == "--mca" and argv[i + 1] == "1" and argv.index("-n") > i
    argv = launch.mpiexec_argv(Path("agent.sh"), Path("hostfile"), "10.0.0.0/24", 2, "mpiexec")
    assert "mpi_yield_when_idle" not in argv


@pytest.mark.cluster
@pytest.mark.mpi
@pytest.mark.slow
@needs_netns
@pytest.mark.timeout(900)
@pytest.mark.parametrize("progress", ["default", "beside-mpi-tcp-thread", "mpich"])
def test_get_from_blocked_node_across_hosts(cluster, progress):
    """Every rank of host 0 sits in a gloo all_reduce while host 1's ranks fetch one-sided from
    them over TCP: MDLoader's progress thread must complete the Gets, alone (the default, and
    under MPICH without its async progress thread) or beside Open MPI's TCP progress thread if a
    user switches it on. (Open MPI's thread alone is not enough: one run in 6-8 hung in
    Win_flush_all, so the loader never relies on it.)"""
    env = {"OMPI_MCA_btl_tcp_progress_thread": "0"}
    if progress == "beside-mpi-tcp-thread":
        env = {"OMPI_MCA_btl_tcp_progress_thread": "1"}
    family = family_or_skip("mpich") if progress == "mpich" else "openmpi"
    if family == "mpich":
        env = {"MPIR_CVAR_ASYNC_PROGRESS": "0"}
    res = cluster.run([sys.executable, "-m", "mpi4py", "tests/mpi_scripts/blocked_target.py",
                       "onesided"], timeout=400, capture_output=True, text=True, cwd=ROOT, env=env,
                      family=family)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "blocked-target ok" in res.stdout
    assert "ranks span 2 nodes, progress thread on" in res.stderr


LEVELED = ("os.t_flush", "os.bw", "coll.t_peer", "coll.bw")  # keys with _intra and _inter


@pytest.mark.cluster
@pytest.mark.mpi
@pytest.mark.slow
@needs_netns
@pytest.mark.timeout(600)
def test_calibrate_across_hosts_measures_inter_node(cluster, tmp_path):
    """`mdloader calibrate --quick` on 2 hosts x 2 ranks fits inter-node parameters from
    off-host pairs, apart from the intra-node ones, and says nodes=2 in its provenance."""
    out = tmp_path / "cluster.json"
    res = cluster.run([sys.executable, "-m", "mpi4py", "-m", "mdloader_plugin", "calibrate",
                       "--quick", "--out", str(out)], timeout=500, capture_output=True,
                      text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    prof = get_profile(str(out))
    prov = prof.provenance
    assert (prov["nodes"], prov["ranks_per_node"], prov["ranks"]) == (2, 2, 4)
    assert sorted(prov["host"]) == sorted(h["hostname"] for h in cluster.hosts)
    assert "get_inter" in prov["fit_rel_rms"] and "get_intra" in prov["fit_rel_rms"]
    for key in LEVELED:
        for level in ("intra", "inter"):
            assert prof.sources[f"{key}_{level}"].startswith("calibrate:"), (key, level)
    assert "inter-node owners" in prof.sources["os.t_flush_inter"]
    differ = [k for k in LEVELED if prof.params[f"{k}_inter"] != prof.params[f"{k}_intra"]]
    assert differ, {k: (prof.params[f"{k}_intra"], prof.params[f"{k}_inter"]) for k in LEVELED}
    # the models read the inter values: pricing off-host owners as on-host changes predictions
    same = {**prof.params, **{f"{k}_inter": prof.params[f"{k}_intra"] for k in LEVELED}}
    w = Workload(4, 64, 12000.0, 4000.0, 2)
    assert any(predict(b, w, prof.params) != predict(b, w, same)
               for b in ("onesided", "collective"))


@pytest.mark.parametrize("backend", ["onesided", "collective"])
def test_models_price_on_host_owners_cheaper(backend):
    """With inter-node links slower than shared memory, the same job packed more ranks a host
    is predicted faster, and a job on one host ignores the inter-node parameters."""
    params = dict(get_profile("local").params)
    for key in LEVELED + ("os.t_get",):
        slow = 10.0 if key.endswith(("t_flush", "t_peer", "t_get")) else 0.1
        params[f"{key}_inter"] = params[f"{key}_intra"] * slow
    times = [predict(backend, Workload(8, 32, 12000.0, 4000.0, rpn), params)
             for rpn in (1, 2, 4, 8)]
    assert times == sorted(times, reverse=True) and times[0] > times[-1]
    one_host = Workload(8, 32, 12000.0, 4000.0, 8)
    other = {**params, **{k: v * 3 for k, v in params.items() if k.endswith("_inter")}}
    assert predict(backend, one_host, other) == pytest.approx(predict(backend, one_host, params))


def test_cluster_state_folder_comes_from_mdloader_cluster_state(tmp_path):
    """MDLOADER_CLUSTER_STATE (docs/reference/configuration.md) is where clusters are looked up:
    a damaged state file there is reported by its path."""
    (tmp_path / "c1").mkdir()
    (tmp_path / "c1" / "state.json").write_text("{not json")
    code = ("from mdloader_plugin.devtools.cluster import STATE_ROOT, Cluster, ClusterError\n"
            "print(STATE_ROOT)\n"
            "try:\n    Cluster.attach('c1')\nexcept ClusterError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT),
                                                    "MDLOADER_CLUSTER_STATE": str(tmp_path)})
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and lines[0] == str(tmp_path), out.stderr
    assert lines[1].startswith(f"{tmp_path / 'c1' / 'state.json'}: unreadable cluster state")


def test_mpich_launch_line_and_environment(tmp_path):
    """Hydra through the same agent: hosts by address with the hostfile's slots, the bridge as
    the address proxies call back; the ranks load MPICH's libmpi and use ofi/tcp on eth0 (the
    wheel's default UCX took shared memory between the emulated hosts)."""
    from mdloader_plugin.devtools.cluster import launch

    hostfile = tmp_path / "hostfile"
    hosts = [{"hostname": "c1-h0", "addr": "10.77.3.2"}, {"hostname": "c1-h1", "addr": "10.77.3.3"}]
    hostfile.write_text("c1-h0 slots=2\nc1-h1 slots=2\n")  # as launch.hostfile_text writes it
    argv = launch.mpiexec_argv(Path("agent.sh"), hostfile, "10.77.3.0/24", 3, "mpiexec",
                               family="mpich", hosts=hosts)
    assert argv == ["mpiexec", "-launcher", "rsh", "-launcher-exec", "agent.sh", "-hosts",
                    "10.77.3.2:2,10.77.3.3:2", "-localhost", "10.77.3.1", "-n", "3"]
    env = launch.mpi_env({"X": "1"}, "mpich")
    assert env["MPI4PY_LIBMPI"] == str(launch.mpich_prefix() / "lib" / "libmpi.so.12")
    assert (env["MPIR_CVAR_CH4_NETMOD"], env["FI_PROVIDER"], env["FI_TCP_IFACE"]) == (
        "ofi", "tcp", "eth0")
    assert "MPI4PY_LIBMPI" not in launch.mpi_env({}, "openmpi") and env["X"] == "1"
    with pytest.raises(ClusterError, match="choose one of openmpi, mpich"):
        launch.check_family("intel")
