"""Emulated hosts as Linux network namespaces joined by a rate-limited bridge.

Each host is a network namespace ``mdl-<name>-h<i>`` holding one end (``eth0``) of a veth pair; the
other end (``mdl<name>v<i>``) is a port of the bridge ``mdl<name>br`` in the root namespace. The
bridge gets ``10.77.X.1/24`` (so ``mpiexec`` can run in the root namespace and be reached by the
hosts' daemons) and host *i* gets ``10.77.X.(i+2)``, where X is the first /24 that no address or
route of the machine, and no other cluster of this tool, uses. Hosts have no default route: they
can only reach each other and the bridge address, never the outside network.

A link rate is a ``tc ... tbf`` qdisc on *both* ends of every veth (bridge side shapes traffic into
the host, namespace side traffic out of it), i.e. a full-duplex NIC of that rate. ``netem``
(latency) is not available on these kernels, so only bandwidth is emulated; the latency is the
kernel's veth path. The tbf burst is 4 ms of traffic at the rate (at least 32 KiB): a larger
bucket lets more of a short message through at full speed. The queue holds one second of
traffic at the rate (at least 16 MB), so the link is *lossless* as an HPC fabric's credit-based
flow control is: with tbf's usual 50 ms queue, several TCP connections a host (each may queue up
to ``tcp_limit_output_bytes``, 4 MB) overflowed it, and the drops cost retransmission timeouts.
Measured (2 hosts x 3 ranks, 100mbit, OC20-like batch 256, 20 steps a backend): 50 ms queue,
81k and 133k packets dropped, 0.9M segments retransmitted, 246 TCP timeouts, steps of 4-14 s;
with the deep queue none dropped, 44 retransmitted, collective median 3.6 s (was 4.0-7.9 s).

Measured (2 cores, 20 MB MPI Send between hosts): 1gbit 0.19 s (0.81-0.87 Gbit/s), 100mbit
1.70 s (0.094 Gbit/s), unlimited 0.06-0.10 s (1.6-2.7 Gbit/s) on an idle machine; under heavy
CPU load the TCP stack itself falls to ~0.8 Gbit/s and a 1gbit limit then barely binds (use
100mbit-500mbit to see the network).

Every namespace and link is recorded in the cluster's state file (see :class:`Cluster`) the
moment it exists, so :func:`teardown` removes a half-built cluster as well as a whole one, and
never something it did not create (``up`` refuses to start where one of its names is taken).
Deleting a namespace destroys its veth end (and so the pair) asynchronously; teardown waits until
the links are gone.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import signal
import subprocess
import time

from ...core.errors import MDLoaderError

SUBNET_POOL = "10.77.{}.0/24"
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,5}$")
RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit)$")
RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
UNLIMITED = ("unlimited", "none", "0")
MAX_HOSTS = 64


class ClusterError(MDLoaderError):
    """The emulated cluster cannot be created, used or removed."""


def check_name(name: str) -> str:
    """``name`` if it is a valid cluster name (it becomes part of interface names), else a
    ``ClusterError``."""
    if not NAME_RE.match(name):
        raise ClusterError(f"cluster name {name!r}: use 1-6 lower-case letters/digits starting "
                           "with a letter (it becomes part of 15-character interface names)")
    return name


def parse_rate(rate: str | None) -> int | None:
    """``"1gbit"`` -> 10**9 bits/s; ``None``/``"unlimited"`` -> None (no qdisc)."""
    if rate is None or str(rate).lower() in UNLIMITED:
        return None
    m = RATE_RE.match(str(rate).lower())
    if not m or float(m.group(1)) <= 0:
        raise ClusterError(f"--rate {rate!r}: expected a tc rate like 100mbit, 1gbit, 10gbit, "
                           "or 'unlimited'")
    return int(float(m.group(1)) * RATE_UNITS[m.group(2)])


def names_for(name: str, hosts: int) -> dict:
    """Interface, namespace and host names of cluster `name` (all under 15 characters)."""
    return {
        "bridge": f"mdl{name}br",
        "hosts": [{"ns": f"mdl-{name}-h{i}", "hostname": f"{name}-h{i}",
                   "veth": f"mdl{name}v{i}"} for i in range(hosts)],
    }


def preflight() -> None:
    """One clear error when this process cannot build namespaces."""
    if os.geteuid() != 0:
        raise ClusterError("the emulated cluster needs root (network namespaces, veth, tc); "
                           "run as root, e.g. in CI or a container")
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:
            raise ClusterError(f"'{tool}' not found on PATH; install iproute2 and util-linux "
                               "(apt-get install -y iproute2 util-linux)")


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run one command; a failure becomes a one-line ClusterError with the command's stderr."""
    res = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if check and res.returncode != 0:
        msg = (res.stderr or res.stdout).strip().splitlines()
        raise ClusterError(f"`{' '.join(argv)}` failed: {msg[-1] if msg else res.returncode}")
    return res


def used_subnets() -> set[ipaddress.IPv4Network]:
    """/24 networks that any address or route of the root namespace touches."""
    nets: set[ipaddress.IPv4Network] = set()
    out = sh("ip", "-4", "-o", "addr", "show").stdout + sh("ip", "-4", "route", "show").stdout
    for tok in re.findall(r"\b(\d+\.\d+\.\d+\.\d+(?:/\d+)?)", out):
        nets.add(ipaddress.ip_network(tok, strict=False))
    return nets


def pick_subnet(taken: set[str]) -> ipaddress.IPv4Network:
    """First 10.77.X.0/24 overlapping no address/route here and no other cluster's subnet."""
    used = used_subnets() | {ipaddress.ip_network(t) for t in taken}
    for x in range(1, 255):
        cand = ipaddress.ip_network(SUBNET_POOL.format(x))
        if not any(cand.overlaps(u) for u in used if u.prefixlen > 0):
            return cand
    raise ClusterError("no free 10.77.X.0/24 subnet left; run `mdloader cluster down` for "
                       "clusters you no longer need")


def tbf_args(bits: int) -> list[str]:
    """``tc`` arguments of a token-bucket filter limiting a link to ``bits`` per second: a 4 ms
    bucket and a one-second (at least 16 MB) queue, so the link delays rather than drops."""
    burst = max(32 * 1024, bits // 8 * 4 // 1000)
    return ["tbf", "rate", f"{bits}bit", "burst", str(burst),
            "limit", str(max(16 * 2**20, bits // 8))]


def create_bridge(bridge: str, addr: str, record) -> None:
    """The root namespace's bridge with the subnet's first address; `record` is told once the
    link exists (so teardown removes only what this tool made)."""
    sh("ip", "link", "add", bridge, "type", "bridge")
    record("links", bridge)
    sh("ip", "addr", "add", addr, "dev", bridge)
    sh("ip", "link", "set", bridge, "up")


def create_host(host: dict, bridge: str, prefixlen: int, record) -> None:
    """Namespace + veth pair (eth0 inside, the named end on the bridge) + address."""
    ns, veth = host["ns"], host["veth"]
    sh("ip", "netns", "add", ns)
    record("namespaces", ns)
    sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
    record("links", veth)
    sh("ip", "link", "set", veth, "master", bridge, "up")
    sh("ip", "-n", ns, "addr", "add", f"{host['addr']}/{prefixlen}", "dev", "eth0")
    sh("ip", "-n", ns, "link", "set", "eth0", "up")
    sh("ip", "-n", ns, "link", "set", "lo", "up")


def set_rate(host: dict, bits: int | None) -> None:
    """Shape both directions of the host's link to `bits`/s (None removes the limit)."""
    inside = ["ip", "netns", "exec", host["ns"], "tc"]
    for prefix, dev in ((["tc"], host["veth"]), (inside, "eth0")):
        if bits is None:
            sh(*prefix, "qdisc", "del", "dev", dev, "root", check=False)
        else:
            sh(*prefix, "qdisc", "replace", "dev", dev, "root", *tbf_args(bits))


def namespaces() -> set[str]:
    """Names of the network namespaces that exist now."""
    out = sh("ip", "netns", "list", check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def link_exists(dev: str) -> bool:
    """Whether the network interface ``dev`` exists in the root namespace."""
    return sh("ip", "link", "show", "dev", dev, check=False).returncode == 0


def ns_pids(ns: str) -> list[int]:
    """Ids of the processes running inside the network namespace ``ns``."""
    out = sh("ip", "netns", "pids", ns, check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def kill_pids(pids: list[int], grace: float = 2.0) -> None:
    """SIGTERM, then SIGKILL whatever is still alive after `grace` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 1.0)):
        alive = [p for p in pids if _alive(p)]
        for p in alive:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(_alive(p) for p in alive):
            time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def teardown(nss: list[str], links: list[str], timeout: float = 10.0) -> list[str]:
    """Kill the namespaces' processes, delete them and the links; return what is still there.

    Deleting a namespace destroys its veth end and so the pair, but asynchronously: wait (up to
    `timeout` s) until every named namespace and link is gone.
    """
    present = namespaces()
    for ns in nss:
        if ns in present:
            kill_pids(ns_pids(ns))
            sh("ip", "netns", "del", ns, check=False)
    for dev in reversed(links):
        if link_exists(dev):
            sh("ip", "link", "del", dev, check=False)
    deadline = time.monotonic() + timeout
    while True:
        left = leftovers(nss, links)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def leftovers(nss: list[str], links: list[str]) -> list[str]:
    """Those of the named namespaces and links that still exist."""
    present = namespaces()
    return [ns for ns in nss if ns in present] + [d for d in links if link_exists(d)]


def orphans(name: str) -> tuple[list[str], list[str]]:
    """Namespaces and links named like cluster `name`'s (for `down` when its state is lost)."""
    ns_re = re.compile(rf"^mdl-{name}-h\d+$")
    link_re = re.compile(rf"^mdl{name}(br|v\d+)$")
    out = sh("ip", "-o", "link", "show", check=False).stdout
    devs = [m.group(1) for m in re.finditer(r"^\d+: ([^:@]+)", out, re.M)]
    return (sorted(n for n in namespaces() if ns_re.match(n)),
            sorted((d for d in devs if link_re.match(d)), key=lambda d: d.endswith("br")))
