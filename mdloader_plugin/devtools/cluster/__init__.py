"""An emulated multi-node cluster on one machine: real MPI over TCP between namespaces.

Each emulated host is a network namespace with its own hostname, linked to a bridge by a veth
pair whose rate a ``tbf`` qdisc limits (:mod:`.netns`); ``mpiexec`` reaches the hosts through a
generated launch agent instead of ssh (:mod:`.launch`). Ranks on one host share memory; ranks on
different hosts talk over TCP through the rate-limited links (Open MPI's TCP BTL, or MPICH's
libfabric with ``family="mpich"``), so the network term of the
cost models (and the backend choice) can be exercised without a second machine.

Python API::

    with Cluster.up(hosts=2, ranks_per_host=2, rate="1gbit", name="bench") as cl:
        argv = cl.mpiexec_argv() + [sys.executable, "-m", "mpi4py", "script.py"]
        subprocess.run(argv, env=cl.env(), timeout=300)
        cl.set_rate("unlimited")        # change the link rate between runs
    # leaving the block runs cl.down(): no namespace, link or process is left

State lives in ``/run/mdloader-cluster/<name>/`` (``state.json``, the agent, the hostfile and the
pids of running jobs); every namespace and link is recorded the moment it exists, so ``down``
(or the cleanup of an ``up`` that failed half-way) removes exactly what this tool made. Needs
root; costs nothing while idle (no process runs between jobs).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from ...core.options import env
from . import launch, netns
from .netns import ClusterError

__all__ = ["Cluster", "ClusterError", "STATE_ROOT"]

STATE_ROOT = Path(env("MDLOADER_CLUSTER_STATE"))
DEFAULT_NAME = "mdl"


class Cluster:
    """A running emulated cluster (create with :meth:`up`, reopen with :meth:`attach`)."""

    def __init__(self, state: dict):
        self.state = state

    # ---- properties --------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.state["name"]

    @property
    def dir(self) -> Path:
        return STATE_ROOT / self.name

    @property
    def hosts(self) -> list[dict]:
        return self.state["hosts"]

    @property
    def ranks_per_host(self) -> "int | list[int]":
        """Ranks of every host (an int), or of each host in order (a list: uneven hosts)."""
        rph = self.state["ranks_per_host"]
        return [int(r) for r in rph] if isinstance(rph, list) else int(rph)

    @property
    def host_ranks(self) -> list[int]:
        """The ranks of each host, in host order."""
        return launch.host_slots(self.hosts, self.ranks_per_host)

    @property
    def size(self) -> int:
        return sum(self.host_ranks)

    @property
    def rate(self) -> str:
        return self.state["rate"]

    # ---- life cycle --------------------------------------------------------------------------
    @classmethod
    def up(cls, hosts: int, ranks_per_host: "int | list[int]", rate: str | None = "1gbit",
           name: str = DEFAULT_NAME) -> "Cluster":
        """Create `hosts` namespaces on a fresh subnet with links limited to `rate`;
        `ranks_per_host` is every host's rank count, or a list of one count a host (uneven
        hosts: ``[3, 1]``)."""
        netns.check_name(name)
        bits = netns.parse_rate(rate)
        if not 1 <= hosts <= netns.MAX_HOSTS:
            raise ClusterError(f"--hosts {hosts}: expected 1..{netns.MAX_HOSTS}")
        ranks_per_host = check_ranks_per_host(ranks_per_host, hosts)
        netns.preflight()
        with _lock():
            self = cls._reserve(name, hosts, ranks_per_host, rate if bits else "unlimited")
        try:
            self._build(bits)
        except BaseException as exc:
            left = self._remove()
            if left and isinstance(exc, ClusterError):
                raise ClusterError(f"{exc}; cleanup left {', '.join(left)}") from exc
            raise
        return self

    @classmethod
    def _reserve(cls, name: str, hosts: int, rph: "int | list[int]", rate: str) -> "Cluster":
        """Pick a subnet and write the state file (under the lock, so two `up`s never share)."""
        if (STATE_ROOT / name / "state.json").exists():
            raise ClusterError(f"cluster '{name}' is already up; run `mdloader cluster down "
                               f"--name {name}` first, or pick another --name")
        nss, links = netns.orphans(name)
        if nss or links:
            raise ClusterError(f"leftovers of a cluster '{name}' exist ({', '.join(nss + links)});"
                               f" run `mdloader cluster down --name {name}` first")
        subnet = netns.pick_subnet({c.state["subnet"] for c in cls.all()})
        addrs = list(subnet.hosts())
        names = netns.names_for(name, hosts)
        for i, h in enumerate(names["hosts"]):
            h["addr"] = str(addrs[i + 1])
        self = cls({"name": name, "subnet": str(subnet), "bridge": names["bridge"],
                    "bridge_addr": f"{addrs[0]}/{subnet.prefixlen}", "hosts": names["hosts"],
                    "ranks_per_host": rph, "rate": rate, "status": "creating",
                    "created": {"namespaces": [], "links": []}, "time": time.time()})
        (self.dir / "jobs").mkdir(parents=True, exist_ok=True)
        self._save()
        return self

    def _build(self, bits: int | None) -> None:
        launch.write_launch_files(self.dir, self.name, self.hosts, self.ranks_per_host)
        netns.create_bridge(self.state["bridge"], self.state["bridge_addr"], self._record)
        prefix = ipaddress.ip_network(self.state["subnet"]).prefixlen
        for host in self.hosts:
            netns.create_host(host, self.state["bridge"], prefix, self._record)
            netns.set_rate(host, bits)
        self.state["status"] = "up"
        self._save()

    @classmethod
    def attach(cls, name: str = DEFAULT_NAME) -> "Cluster":
        """The cluster `name` brought up earlier (by this or another process)."""
        path = STATE_ROOT / netns.check_name(name) / "state.json"
        try:
            return cls(json.loads(path.read_text()))
        except FileNotFoundError:
            raise ClusterError(f"no cluster named '{name}' is up (see `mdloader cluster "
                               "status`; create one with `mdloader cluster up`)") from None
        except (OSError, ValueError) as exc:
            raise ClusterError(f"{path}: unreadable cluster state ({exc}); "
                               f"`mdloader cluster down --name {name}` removes it") from None

    @classmethod
    def all(cls) -> list["Cluster"]:
        """Every cluster with a state file, by name."""
        out = []
        for path in sorted(STATE_ROOT.glob("*/state.json")):
            with contextlib.suppress(OSError, ValueError):
                out.append(cls(json.loads(path.read_text())))
        return out

    @classmethod
    def down_by_name(cls, name: str = DEFAULT_NAME) -> list[str]:
        """Remove cluster `name`, also when its state file is missing or damaged. Returns what
        was removed (empty when there was nothing)."""
        netns.preflight()
        try:
            cl = cls.attach(name)
        except ClusterError:
            nss, links = netns.orphans(name)
            left = netns.teardown(nss, links)
            shutil.rmtree(STATE_ROOT / name, ignore_errors=True)
            if left:
                raise ClusterError(f"could not remove {', '.join(left)}") from None
            return nss + links
        removed = cl.state["created"]["namespaces"] + cl.state["created"]["links"]
        cl.down()
        return removed

    def down(self) -> None:
        """Kill running jobs and every process in the hosts, delete namespaces, links, state."""
        left = self._remove()
        if left:
            raise ClusterError(f"cluster '{self.name}': could not remove {', '.join(left)}")

    def _remove(self) -> list[str]:
        netns.kill_pids(self.job_pids())
        made = self.state["created"]
        nss, links = netns.orphans(self.name)  # also what a crash kept from being recorded
        left = netns.teardown(sorted(set(made["namespaces"]) | set(nss)),
                              list(dict.fromkeys(made["links"] + links)))
        if not left:
            shutil.rmtree(self.dir, ignore_errors=True)
        return left

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    # ---- use ---------------------------------------------------------------------------------
    def set_rate(self, rate: str | None) -> None:
        """Change every host link's rate (``"unlimited"`` removes the limit)."""
        bits = netns.parse_rate(rate)
        for host in self.hosts:
            netns.set_rate(host, bits)
        self.state["rate"] = rate if bits else "unlimited"
        self._save()

    def mpiexec_argv(self, n: int | None = None, family: str = "openmpi") -> list[str]:
        """``mpiexec`` of MPI `family` (``openmpi`` or ``mpich``, :mod:`.launch`) and its options
        for `n` ranks (default hosts x ranks_per_host); append the program and its arguments."""
        return launch.mpiexec_argv(self.dir / "agent.sh", self.dir / "hostfile",
                                   self.state["subnet"], self.size if n is None else n,
                                   family=family, hosts=self.hosts)

    def env(self, extra: dict | None = None, family: str = "openmpi") -> dict:
        """Environment for the ``mpiexec`` (this process's plus what `family` needs)."""
        return launch.mpi_env(extra, family)

    def run(self, cmd: list[str], n: int | None = None, *, timeout: float | None = None,
            env: dict | None = None, capture_output: bool = False, family: str = "openmpi",
            **kwargs) -> subprocess.CompletedProcess:
        """Run `cmd` as an MPI job of `family` on the cluster (like :func:`subprocess.run`;
        `env` adds to :meth:`env`). The job's pid is recorded so ``down`` can end it; on timeout
        (raises :class:`subprocess.TimeoutExpired`) or interrupt the job is killed."""
        if capture_output:
            kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc = subprocess.Popen(self.mpiexec_argv(n, family) + list(cmd),
                                env=self.env(env, family),
                                start_new_session=True, **kwargs)
        pidfile = self.dir / "jobs" / str(proc.pid)
        pidfile.write_text(" ".join(cmd))
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            netns.kill_pids([proc.pid])
            proc.communicate()
            raise
        finally:
            pidfile.unlink(missing_ok=True)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def job_pids(self) -> list[int]:
        """Pids of this cluster's running jobs (``mpiexec`` processes started by :meth:`run`)."""
        pids = []
        for f in (self.dir / "jobs").glob("*"):
            if f.name.isdigit() and _is_mpiexec(int(f.name)):
                pids.append(int(f.name))
        return pids

    def processes(self) -> dict[str, list[int]]:
        """Pids running inside each host's namespace."""
        return {h["hostname"]: netns.ns_pids(h["ns"]) for h in self.hosts}

    def describe(self) -> str:
        hosts = ", ".join(f"{h['hostname']}={h['addr']}" for h in self.hosts)
        rph = self.ranks_per_host
        each = ",".join(map(str, rph)) if isinstance(rph, list) else rph
        return (f"{self.name}: {len(self.hosts)} hosts x {each} ranks, "
                f"rate {self.rate}, subnet {self.state['subnet']} ({hosts}), "
                f"{self.state['status']}, {len(self.job_pids())} job(s) running")

    # ---- internals ---------------------------------------------------------------------------
    def _record(self, kind: str, name: str) -> None:
        self.state["created"][kind].append(name)
        self._save()

    def _save(self) -> None:
        tmp = self.dir / "state.json.tmp"
        tmp.write_text(json.dumps(self.state, indent=1))
        tmp.replace(self.dir / "state.json")


def check_ranks_per_host(value: "int | str | list", hosts: int) -> "int | list[int]":
    """`value` as :meth:`Cluster.up` keeps it: an int >= 1 (every host), or one int >= 1 a
    host (``"3,1"`` or ``[3, 1]``; equal counts become the int). A ClusterError otherwise."""
    text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    try:
        counts = [int(v) for v in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1 or len(counts) not in (1, hosts):
        raise ClusterError(f"--ranks-per-host {text}: expected a count >= 1 for every host, or "
                           f"one a host ({hosts} comma-separated, e.g. 3,1)")
    return counts[0] if len(set(counts)) == 1 else counts


def _is_mpiexec(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False
    return os.path.basename(cmd).decode(errors="replace") in ("mpiexec", "mpirun", "prterun",
                                                              "mpiexec.hydra")


@contextlib.contextmanager
def _lock():
    STATE_ROOT.mkdir(parents=True, exist_ok=True)
    with open(STATE_ROOT / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
