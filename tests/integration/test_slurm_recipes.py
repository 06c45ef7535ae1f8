"""The batch recipes in slurm/: syntax and lint, dry runs of the Perlmutter/Frontier scripts, and
the local HydraGNN recipe submitted to a real one-node Slurm (slurm/cluster/local-slurm.sh)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpirun import mpi_env

ROOT = Path(__file__).resolve().parents[2]
SLURM = ROOT / "slurm"
CLUSTER = SLURM / "cluster" / "local-slurm.sh"
SCRIPTS = sorted(SLURM.glob("*.sbatch")) + sorted((SLURM / "lib").glob("*.sh")) + [CLUSTER]
SITES = {"perlmutter": (4, 32), "frontier": (8, 7)}  # GPUs (GCDs) a node, CPUs a task
# rank i's cores: the NUMA domain (Perlmutter) / L3 region (Frontier) closest to GPU i
CPU_BIND = {"perlmutter": "map_ldom:3,2,1,0",
            "frontier": "mask_cpu:" + ",".join(hex(0x7F << c)
                                               for c in (49, 57, 17, 25, 1, 9, 33, 41))}
PLUGIN = {"perlmutter": "libnccl-net.so", "frontier": "librccl-net.so"}


def _ids(path: Path) -> str:
    return str(path.relative_to(SLURM))


@pytest.mark.parametrize("script", SCRIPTS, ids=_ids)
def test_bash_syntax(script):
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr


def _shellcheck() -> str:
    found = shutil.which("shellcheck")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("shellcheck is not installed and cannot be (needs root and apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    apt = ["apt-get", "-o", "DPkg::Lock::Timeout=300", "-y", "-q"]
    if subprocess.run(apt + ["install", "shellcheck"], env=env, capture_output=True,
                      timeout=600).returncode != 0:
        subprocess.run(apt + ["update"], env=env, capture_output=True, timeout=600)
        subprocess.run(apt + ["install", "shellcheck"], env=env, capture_output=True, timeout=600)
    return shutil.which("shellcheck") or pytest.skip("apt-get could not install shellcheck")


def test_shellcheck_clean():
    tool = _shellcheck()
    proc = subprocess.run([tool, "-x", "-S", "warning", *map(str, SCRIPTS)], cwd=SLURM,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def dry_run(script: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """``MDLOADER_DRY_RUN=1 bash slurm/SCRIPT`` outside any Slurm job."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "MDLOADER_"))}
    base.update(MDLOADER_DRY_RUN="1", MDLOADER_PROFILE_CACHE=str(tmp_path / "prof" / "p.json"))
    base.update(env)
    return subprocess.run(["bash", str(SLURM / script)], env=base, capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)


def commands(out: str) -> list[list[str]]:
    """The printed command lines ("+ ..."), split as the shell would."""
    return [shlex.split(ln[2:]) for ln in out.splitlines() if ln.startswith("+ ")]


def flags(cmd: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in cmd if a.startswith("--") and "=" in a)


@pytest.mark.parametrize("framework", ["hydragnn", "fairchem"])
@pytest.mark.parametrize("site", sorted(SITES))
def test_site_dry_run_calibrates_once_then_trains_one_rank_a_gpu(tmp_path, site, framework):
    gpus, cpus = SITES[site]
    proc = dry_run(f"{site}-{framework}.sbatch", tmp_path, SLURM_JOB_NUM_NODES="3")
    assert proc.returncode == 0, proc.stderr
    cmds = commands(proc.stdout)
    exports = {c[1] for c in cmds if c[0] == "export"}
    assert {"MPICH_MAX_THREAD_SAFETY=multiple", "MPICH_GPU_SUPPORT_ENABLED=0"} <= exports
    # MDLoader runs its own progress thread; MPICH's is not needed (docs/how-it-works.md)
    assert not any(e.startswith("MPICH_ASYNC_PROGRESS") for e in exports)
    assert any(c[:2] == ["module", "load"] for c in cmds)
    sruns = [c for c in cmds if c[0] == "srun"]
    assert len(sruns) == 2, proc.stdout
    calibrate, train = sruns
    profile = str(tmp_path / "prof" / "p.json")
    assert calibrate[-4:] == ["mdloader_plugin", "calibrate", "--out", profile]
    assert flags(calibrate)["nodes"] == "2" and flags(calibrate)["ntasks"] == str(2 * gpus)
    f = flags(train)
    assert (f["nodes"], f["ntasks"], f["ntasks-per-node"]) == ("3", str(3 * gpus), str(gpus))
    assert (f["cpus-per-task"], f["cpu-bind"]) == (str(cpus), CPU_BIND[site])
    # every rank sees every GPU of its node: NVLink / xGMI peer-to-peer stays on for NCCL/RCCL
    assert (f["gpus-per-node"], f["gpu-bind"]) == (str(gpus), "none")
    assert not any(a.startswith("--gpus-per-task") for a in train + calibrate)
    assert f["kill-on-bad-exit"] == "1" and flags(calibrate)["kill-on-bad-exit"] == "1"
    tail = train[train.index("mdloader_plugin"):]
    assert tail[:3] == ["mdloader_plugin", "train", framework]
    assert any(a == "loader=mdloader" for a in tail)
    assert any(a.endswith(f"profile={profile}") for a in tail)


@pytest.mark.parametrize("site", sorted(SITES))
def test_site_dry_run_baseline_skips_calibration(tmp_path, site):
    proc = dry_run(f"{site}-hydragnn.sbatch", tmp_path, MDLOADER_LOADER="hydragnn",
                   MDLOADER_NODES="2", MDLOADER_SET="NeuralNetwork.Training.num_epoch=1")
    assert proc.returncode == 0, proc.stderr
    sruns = [c for c in commands(proc.stdout) if c[0] == "srun"]
    assert len(sruns) == 1
    (train,) = sruns
    assert flags(train)["ntasks"] == str(2 * SITES[site][0])
    tail = train[train.index("train"):]
    assert tail[tail.index("--config") + 1] == str(ROOT / f"recipes/hydragnn/perlmutter.yaml")
    assert [tail[i + 1] for i, a in enumerate(tail) if a == "--set"] == [
        "loader=hydragnn", f"run_name=hydragnn-{site}-dry-hydragnn",
        "NeuralNetwork.Training.num_epoch=1"]


def _site_env(site: str, tmp_path: Path) -> dict:
    """A job's environment on `site`, its scratch folder under tmp_path."""
    if site == "perlmutter":
        return {"PSCRATCH": str(tmp_path / "pscratch"), "SLURM_JOB_NUM_NODES": "2",
                "SLURM_JOB_ID": "42"}
    return {"MEMBERWORK": str(tmp_path / "memberwork"), "SLURM_JOB_ACCOUNT": "ABC123",
            "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_ID": "42"}


@pytest.mark.parametrize("site", sorted(SITES))
def test_site_dry_run_prints_the_exact_srun_line_and_environment(tmp_path, site):
    """The whole job as it would run, with the CCL plugin found: every exported variable and the
    two srun lines, exactly; data, profile, logs and runs on the site's scratch."""
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / PLUGIN[site]).write_text("")
    env = _site_env(site, tmp_path)
    env.update(MDLOADER_CCL_PLUGIN_DIR=str(plugin), LD_LIBRARY_PATH="/opt/lib", PYTHONPATH="")
    proc = dry_run(f"{site}-hydragnn.sbatch", tmp_path, MDLOADER_PROFILE_CACHE="", **env)
    assert proc.returncode == 0, proc.stderr
    print(proc.stdout)  # the exact lines, for a reader of the test log
    gpus, cpus = SITES[site]
    scratch = (tmp_path / "pscratch" / "mdloader" if site == "perlmutter"
               else tmp_path / "memberwork" / "abc123" / "mdloader")
    profile = scratch / f"{site}-profile.json"
    ccl = {"perlmutter": ["NCCL_NET=AWS Libfabric", "NCCL_SOCKET_IFNAME=hsn", "NCCL_CROSS_NIC=1",
                          "NCCL_NET_GDR_LEVEL=PHB", "FI_CXI_DISABLE_HOST_REGISTER=1",
                          "FI_MR_CACHE_MONITOR=userfaultfd", "FI_CXI_DEFAULT_CQ_SIZE=131072"],
           "frontier": ["NCCL_NET=AWS Libfabric", "NCCL_SOCKET_IFNAME=hsn0",
                        "GLOO_SOCKET_IFNAME=hsn0", "NCCL_CROSS_NIC=1", "NCCL_NET_GDR_LEVEL=3",
                        "FI_CXI_ATS=0", "FI_MR_CACHE_MONITOR=kdreg2",
                        "FI_CXI_DEFAULT_CQ_SIZE=131072", "FI_CXI_DEFAULT_TX_SIZE=2048",
                        "FI_CXI_DISABLE_HOST_REGISTER=1", "HSA_FORCE_FINE_GRAIN_PCIE=1",
                        f"MIOPEN_USER_DB_PATH=/tmp/miopen-{os.environ.get('USER', 'mdloader')}",
                        f"MIOPEN_CUSTOM_CACHE_DIR="
                        f"/tmp/miopen-{os.environ.get('USER', 'mdloader')}"]}
    srun = ["srun", "--kill-on-bad-exit=1", "--nodes={n}", f"--ntasks={{t}}",
            f"--ntasks-per-node={gpus}", f"--cpus-per-task={cpus}",
            f"--cpu-bind={CPU_BIND[site]}", f"--gpus-per-node={gpus}", "--gpu-bind=none",
            str(ROOT / ".venv/bin/python"), "-m", "mpi4py", "-m", "mdloader_plugin"]

    def launch(n):
        return [a.format(n=n, t=n * gpus) for a in srun]

    expected = [
        ["module", "load", *({"perlmutter": "PrgEnv-gnu cray-mpich cudatoolkit "
                                            "craype-accel-nvidia80 python nccl",
                              "frontier": "PrgEnv-gnu cray-mpich rocm craype-accel-amd-gfx90a "
                                          "cray-python"}[site].split())],
        *[["export", kv] for kv in (
            "MPICH_MAX_THREAD_SAFETY=multiple",
            "MPICH_OFI_NIC_POLICY=NUMA", "MPICH_GPU_SUPPORT_ENABLED=0",
            "FI_CXI_RX_MATCH_MODE=hybrid", "OMP_NUM_THREADS=1", "PYTHONUNBUFFERED=1",
            f"LD_LIBRARY_PATH={plugin}:/opt/lib", *ccl[site],
            f"MDLOADER_DATA_DIR={scratch / 'data'}", f"PYTHONPATH={ROOT}")],
        ["mkdir", "-p", str(scratch / "runs")],
        ["cd", str(scratch / "runs")],
        launch(2) + ["calibrate", "--out", str(profile)],
        ["export", f"MDLOADER_PROFILE={profile}"],
        launch(2) + ["train", "hydragnn",
                     "--config", str(ROOT / "recipes/hydragnn/perlmutter.yaml"),
                     "--set", "loader=mdloader", "--set", f"mdloader.profile={profile}",
                     "--set", f"run_name=hydragnn-{site}-42-mdloader"],
    ]
    assert commands(proc.stdout) == expected
    assert "warning" not in proc.stderr
    assert f"{scratch / 'runs'}/logs/hydragnn-{site}-42-mdloader/run.log" in proc.stderr


@pytest.mark.parametrize("site", sorted(SITES))
def test_site_dry_run_takes_the_documented_site_parameters(tmp_path, site):
    """MDLOADER_ROOT, _VENV, _CONFIG, _MODULES, _RUN_NAME (docs/slurm.md, Site parameters) each
    change the job as documented; a missing venv or config stops a real (not dry) run at once
    with one line naming the variable (a dry run only reports paths)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    config = tmp_path / "mine.yaml"
    config.write_text((ROOT / "recipes/hydragnn/perlmutter.yaml").read_text())
    env = {**_site_env(site, tmp_path), "MDLOADER_ROOT": str(ROOT), "MDLOADER_VENV": str(venv),
           "MDLOADER_CONFIG": str(config), "MDLOADER_MODULES": "",
           "MDLOADER_RUN_NAME": "scan7", "MDLOADER_LOADER": "hydragnn"}
    proc = dry_run(f"{site}-hydragnn.sbatch", tmp_path, **env)  # cwd: not the checkout
    assert proc.returncode == 0, proc.stderr
    cmds = commands(proc.stdout)
    assert not any(c[0] == "module" for c in cmds)
    (train,) = [c for c in cmds if c[0] == "srun"]
    assert train[train.index("-m") - 1] == str(venv / "bin" / "python")
    tail = train[train.index("train"):]
    assert tail[tail.index("--config") + 1] == str(config)
    assert "run_name=scan7-hydragnn" in tail
    for key, value, line in (
            ("MDLOADER_VENV", str(tmp_path / "none"),
             f"no python at {tmp_path / 'none'}/bin/python; run 'make install' or set "
             "MDLOADER_VENV"),
            ("MDLOADER_CONFIG", str(tmp_path / "none.yaml"),
             f"config {tmp_path / 'none.yaml'} not found; set MDLOADER_CONFIG")):
        bad = dry_run(f"{site}-hydragnn.sbatch", tmp_path,
                      **{**env, key: value, "MDLOADER_DRY_RUN": "0"})
        assert bad.returncode == 2 and line in bad.stderr, bad.stderr


@pytest.mark.parametrize("framework,loader,data", [
    ("hydragnn", "mdloader", "mols-2M.bp"), ("hydragnn", "hydragnn", "mols-2M.bp"),
    ("fairchem", "mdloader", "oc20/oc20.bp"), ("fairchem", "fairchem", "oc20/train")])
@pytest.mark.parametrize("site", sorted(SITES))
def test_site_without_its_data_stops_naming_the_documented_step(tmp_path, site, framework,
                                                                 loader, data):
    """A real (not dry) job whose recipe config's data file is missing stops before anything
    runs, exit 2, with one line naming the file and the step that makes it (docs/first-job.md)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    env = {**_site_env(site, tmp_path), "MDLOADER_ROOT": str(ROOT), "MDLOADER_VENV": str(venv),
           "MDLOADER_MODULES": "", "MDLOADER_LOADER": loader, "MDLOADER_DRY_RUN": "0",
           "MDLOADER_DATA_DIR": str(tmp_path / "data"), "LD_LIBRARY_PATH": ""}
    proc = dry_run(f"{site}-{framework}.sbatch", tmp_path, **env)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if "error" in ln]
    assert errors == [f"mdloader-recipe: error: no data file {tmp_path / 'data' / data} (what "
                      f"recipes/{framework}/perlmutter.yaml reads); make it first: "
                      "docs/first-job.md, step 2 (mdloader convert), or set MDLOADER_DATA_DIR "
                      "or MDLOADER_CONFIG"], proc.stderr
    assert not (tmp_path / "prof").exists()  # nothing ran: no calibration
    (tmp_path / "data" / data).mkdir(parents=True)  # with the data the job goes on (to srun)
    proc = dry_run(f"{site}-{framework}.sbatch", tmp_path, **env, PATH="/usr/bin:/bin")
    assert "no data file" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("site", sorted(SITES))
def test_site_without_ccl_plugin_warns_and_leaves_nccl_net_unset(tmp_path, site):
    proc = dry_run(f"{site}-fairchem.sbatch", tmp_path, LD_LIBRARY_PATH="",
                   **_site_env(site, tmp_path))
    assert proc.returncode == 0, proc.stderr
    exports = [c[1] for c in commands(proc.stdout) if c[0] == "export"]
    assert not any(e.startswith("NCCL_NET=") for e in exports)
    assert f"warning: no {PLUGIN[site].split('.')[0]}*.so" in proc.stderr


@pytest.mark.parametrize("site", sorted(SITES))
def test_one_node_job_does_not_calibrate_and_uses_the_shipped_profile(tmp_path, site):
    """A one-node job's calibration would copy intra-node figures into the inter-node ones of the
    profile every later job reuses: it trains with the shipped site profile and says so."""
    proc = dry_run(f"{site}-hydragnn.sbatch", tmp_path, SLURM_JOB_NUM_NODES="1")
    assert proc.returncode == 0, proc.stderr
    sruns = [c for c in commands(proc.stdout) if c[0] == "srun"]
    assert len(sruns) == 1 and "calibrate" not in sruns[0], proc.stdout
    assert f"mdloader.profile={site}" in sruns[0]
    assert "one node: not calibrating" in proc.stderr
    assert not (tmp_path / "prof").exists()


def test_cached_profile_is_reused(tmp_path):
    cache = tmp_path / "prof" / "p.json"
    cache.parent.mkdir()
    cache.write_text("{}")
    proc = dry_run("perlmutter-fairchem.sbatch", tmp_path)
    assert proc.returncode == 0, proc.stderr
    sruns = [c for c in commands(proc.stdout) if c[0] == "srun"]
    assert len(sruns) == 1 and "calibrate" not in sruns[0]
    assert f"loader.profile={cache}" in sruns[0]
    assert "cached" in proc.stderr


def test_unknown_loader_is_a_one_line_error(tmp_path):
    proc = dry_run("frontier-fairchem.sbatch", tmp_path, MDLOADER_LOADER="torch")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "mdloader-recipe: error: MDLOADER_LOADER=torch: choose mdloader or fairchem"]


def test_local_dry_run_trains_both_loaders_then_compares(tmp_path):
    proc = dry_run("local-hydragnn.sbatch", tmp_path, SLURM_NTASKS="4", SLURM_JOB_ID="77",
                   MDLOADER_PROFILE_CACHE="")
    assert proc.returncode == 0, proc.stderr
    cmds = [c for c in commands(proc.stdout) if c[0] != "export"]
    assert len(cmds) == 3
    for cmd, loader in zip(cmds, ["mdloader", "hydragnn"]):
        assert cmd[:4] == ["timeout", "1800", str(ROOT / ".venv/bin/mpiexec"), "-n"]
        assert cmd[4] == "4" and cmd[-4:] == ["--set", f"loader={loader}", "--set",
                                              f"run_name=hydragnn-77-{loader}"]
    assert cmds[2][-3:] == ["compare-logs", "logs/hydragnn-77-hydragnn/run.log",
                            "logs/hydragnn-77-mdloader/run.log"]


# --- the real one-node Slurm ---------------------------------------------------------------

def _cluster(cmd: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "MDLOADER_SLURM_DIR"}
    return subprocess.run(["bash", str(CLUSTER), cmd], env={**base, **env},
                          capture_output=True, text=True, timeout=60)


def test_local_slurm_folder_is_private_by_default(tmp_path):
    """Root's daemons run from the folder's munge key and slurm.conf: its default is under the
    user's home, not a fixed name in /tmp that anyone could make first; a folder others may
    write, a link or another user's folder is one line, before anything starts."""
    home = tmp_path / "home"
    default = home / ".cache" / "mdloader-slurm"
    default.mkdir(parents=True)
    default.chmod(0o777)
    for cmd in ("status", "stop", "start"):  # status first: on a check-less script it fails there
        res = _cluster(cmd, HOME=str(home))
        assert res.returncode != 0 and res.stderr.splitlines() == [
            f"local-slurm: error: {default} is writable by others (mode 777): chmod 700 it or "
            "set MDLOADER_SLURM_DIR to a folder of your own"], (cmd, res.stderr)
    link = tmp_path / "link"
    link.symlink_to(default)
    res = _cluster("status", MDLOADER_SLURM_DIR=str(link))
    assert res.returncode != 0 and res.stderr.splitlines() == [
        f"local-slurm: error: {link} is a symbolic link; set MDLOADER_SLURM_DIR to a folder of "
        "your own"], res.stderr
    default.chmod(0o700)
    res = _cluster("status", HOME=str(home))  # a private folder: status runs (nothing up)
    assert "error" not in res.stderr and "slurmctld: stopped" in res.stdout, res.stderr



def _train_registered() -> str | None:
    """Why the HydraGNN driver cannot run here (None when it can)."""
    from mdloader_plugin.cli import COMMANDS

    if "train" not in COMMANDS:
        return "`mdloader train` is not a registered command yet (cli COMMANDS)"
    try:
        import mdloader_plugin.integrations.hydragnn.driver  # noqa: F401
    except ImportError as exc:
        return f"the HydraGNN driver does not import ({exc})"
    return None


@pytest.fixture(scope="session")
def local_slurm(tmp_path_factory):
    """A one-node Slurm of our own (private dir and ports), stopped at teardown."""
    if os.geteuid() != 0:
        pytest.skip("the one-node Slurm runs its daemons as root (SlurmUser=root)")
    if not shutil.which("slurmctld") and not shutil.which("apt-get"):
        pytest.skip("Slurm is not installed and apt-get is not available to install it")
    state = tmp_path_factory.mktemp("slurm")  # this run's own folder
    state.chmod(0o700)  # root's daemons run from its key and config: nobody else may write it
    # every documented setting of local-slurm.sh, so that each is exercised
    env = {**os.environ, "MDLOADER_SLURM_DIR": str(state), "MDLOADER_SLURM_PORT": "6847",
           "MDLOADER_SLURM_PARTITION": "mdltest", "MDLOADER_SLURM_CPUS": "2",
           "MDLOADER_SLURM_TIMEOUT": "120"}
    start = subprocess.run(["bash", str(CLUSTER), "start"], env=env, capture_output=True,
                           text=True, timeout=900)
    if start.returncode != 0:
        subprocess.run(["bash", str(CLUSTER), "stop"], env=env, capture_output=True, timeout=120)
        pytest.fail(f"local-slurm.sh start failed:\n{start.stderr}")
    conf = re.search(r"^export SLURM_CONF=(\S+)$", start.stdout, re.M).group(1)
    yield {**env, "SLURM_CONF": conf}
    subprocess.run(["bash", str(CLUSTER), "stop"], env=env, capture_output=True, timeout=120)


def sbatch_wait(script: str, out: Path, env: dict, timeout: float) -> tuple[str, int]:
    """Submit `script` (stdout to `out`), wait for the job to end; (job id, its exit status), as
    ``sbatch --wait`` gives them, polled every second: Slurm's own ``--wait`` polls 2, 10, 42,
    74, 106 s ... after the submission (22.05, the default MinJobAge), so it returned up to 32 s
    after the job ended (measured 2026-12-07: 106.6 s and 10.0 s for this file's two jobs)."""
    sub = subprocess.run(["sbatch", "--parsable", "-o", str(out), script], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert sub.returncode == 0, sub.stdout + sub.stderr
    job = sub.stdout.strip().split(";")[0]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        show = subprocess.run(["scontrol", "show", "job", "-o", job], env=env,
                              capture_output=True, text=True, timeout=60)
        state = re.search(r"\bJobState=(\S+)", show.stdout)
        assert state, show.stdout + show.stderr
        if state.group(1) not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING",
                                  "SUSPENDED", "REQUEUED", "RESIZING"):
            code, signal = map(int, re.search(r"\bExitCode=(\d+):(\d+)", show.stdout).groups())
            failed = state.group(1) != "COMPLETED"
            return job, code or (128 + signal if signal else int(failed))
        time.sleep(1)
    raise subprocess.TimeoutExpired(["sbatch", script], timeout)


@pytest.mark.slurm
def test_local_slurm_takes_its_documented_settings(request):
    """MDLOADER_SLURM_PARTITION and MDLOADER_SLURM_CPUS shape the node; it came up idle within
    MDLOADER_SLURM_TIMEOUT."""
    env = request.getfixturevalue("local_slurm")
    out = subprocess.run(["sinfo", "-h", "-o", "%P %c %t"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["mdltest*", "2", "idle"], out.stdout


@pytest.fixture(scope="session")
def small_hydragnn_file(tmp_path_factory):
    from mdloader_plugin.sources import synth
    from mdloader_plugin.sources.adios import write_graphs

    graphs = list(synth.generate("hydragnn", 0, 0, 400))
    path = tmp_path_factory.mktemp("slurmdata") / "demo.bp"
    write_graphs(path, {"trainset": graphs[:320], "valset": graphs[320:360],
                        "testset": graphs[360:]})
    return path


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_local_hydragnn_recipe_on_real_slurm(request, tmp_path, small_hydragnn_file):
    reason = _train_registered()
    if reason:
        pytest.skip(reason)
    env = mpi_env(request.getfixturevalue("local_slurm"))
    env.update(MDLOADER_WORKDIR=str(tmp_path), MDLOADER_TIMEOUT="1200",
               MDLOADER_SET=f"Dataset.path={small_hydragnn_file} "
                            "NeuralNetwork.Training.num_epoch=2")
    out = tmp_path / "job.out"
    job_id, code = sbatch_wait("slurm/local-hydragnn.sbatch", out, env, timeout=1400)
    job_log = out.read_text() if out.exists() else "(no job output)"
    assert code == 0, f"job {job_id} exited {code}\n--- job output ---\n{job_log}"

    loaders = ("hydragnn", "mdloader")  # baseline first: speed-ups are against it
    logs = [tmp_path / "logs" / f"hydragnn-{job_id}-{loader}" / "run.log" for loader in loaders]
    from mdloader_plugin.core.epochlog import parse_epoch_lines

    for log, loader in zip(logs, loaders):
        recs = parse_epoch_lines(log.read_text().splitlines())
        assert {r["loader"] for r in recs} == {loader}
        assert sorted(r["epoch"] for r in recs) == [0, 1]
        assert all(r["wall_s"] > 0 for r in recs)
    assert "speed-up" in job_log  # the job ran compare-logs itself

    png = tmp_path / "epochs.png"
    cmp_ = subprocess.run([sys.executable, "-m", "mdloader_plugin", "compare-logs",
                           *map(str, logs), "--plot", str(png)],
                          capture_output=True, text=True, timeout=120)
    assert cmp_.returncode == 0, cmp_.stderr
    rows = [ln.split() for ln in cmp_.stdout.splitlines()[1:3]]
    assert [r[:2] for r in rows] == [[f"hydragnn-{job_id}-{loader}", loader]
                                     for loader in loaders]
    assert rows[0][-1] == "1.00x" and rows[1][3] == "2" and rows[1][-1].endswith("x")
    assert png.stat().st_size > 1000


@pytest.mark.slurm
@pytest.mark.timeout(600)
def test_world_size_check_under_srun_with_the_wrong_mpi(request, tmp_path, small_hydragnn_file):
    """The local recipe launched by ``srun`` while mpi4py loads the Open MPI wheel, which cannot
    talk to Slurm's PMI: each task is a one-rank MPI job. Every rank stops at start with exit 2;
    one line names the world size, SLURM_NTASKS and the likely cause; nothing trains."""
    env = mpi_env(request.getfixturevalue("local_slurm"))
    env.update(MDLOADER_WORKDIR=str(tmp_path), MDLOADER_TIMEOUT="300", MDLOADER_LAUNCHER="srun",
               MDLOADER_LOADERS="mdloader", MDLOADER_SET=f"Dataset.path={small_hydragnn_file}")
    env.pop("MPI4PY_LIBMPI", None)
    out = tmp_path / "job.out"
    _job, code = sbatch_wait("slurm/local-hydragnn.sbatch", out, env, timeout=500)
    job_log = out.read_text() if out.exists() else "(no job output)"
    assert code != 0, job_log
    assert "Exited with exit code 2" in job_log
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").rglob("run.log"))
    errors = [ln for ln in job_log.splitlines() if ln.startswith("mdloader: error:")]
    if not errors and "no-pmix-but" in job_log:
        # Open MPI may refuse first: a task that finds Slurm's variables but no PMIx server
        # stops in MPI_Init with its own "no-pmix-but" message (exit 2) and srun's
        # --kill-on-bad-exit ends the others before they reach the check; seen once in 8 runs
        # (2026-12-06, in a full `make test`; alone it passed 5 of 5). The job still ends at once.
        return
    assert errors == ["mdloader: error: MPI world size 1 but SLURM_NTASKS=4: the launcher started "
                      "4 processes that MPI does not see as one job; mpi4py is likely built "
                      "against another MPI (Open MPI v5.0.11) than the launcher's: rebuild it on "
                      "the site's MPI (Cray: MPICC=\"cc -shared\" pip install --force-reinstall "
                      "--no-binary=mpi4py mpi4py) or launch with that MPI's mpiexec "
                      "(MDLOADER_LAUNCH_CHECK=0 skips this check)"], job_log
