"""torch.distributed's rendezvous from MPI: rank 0 picks an address and a port, every rank gets
them.

MDLoader's drivers start ``torch.distributed`` (gloo or NCCL) beside MPI; the address and port
travel by one MPI broadcast, so no file system or batch-system variable is needed.
"""

from __future__ import annotations

import os


def host_address() -> tuple[str, str | None]:
    """This host's address other nodes can reach, and its interface name when known.

    The host name if it resolves to a non-loopback address (real clusters), else the first global
    IPv4 address of ``ip -4 -o addr`` (hosts whose names are not in DNS, such as the emulated
    cluster's network namespaces)."""
    import socket
    import subprocess

    name = socket.gethostname()
    try:
        addr = socket.gethostbyname(name)
        if not addr.startswith("127."):
            return addr, None
    except OSError:
        pass
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"],
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            return parts[parts.index("inet") + 1].split("/")[0], parts[1]
    return name, None


def free_port() -> int:
    """A TCP port free on this host now (for torch.distributed's rendezvous)."""
    import socket

    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def rendezvous_env(comm, single_node: bool) -> dict[str, str]:
    """``MASTER_ADDR``/``MASTER_PORT`` for torch.distributed, chosen by rank 0 and broadcast
    (collective). ``MASTER_ADDR`` already set on rank 0 wins. One node: loopback. Several: rank
    0's reachable address; where that address
    needed an interface lookup, each rank also gets ``GLOO_SOCKET_IFNAME`` for its own interface
    so gloo does not depend on host-name resolution either."""
    if os.environ.get("MASTER_ADDR"):  # the user's (or the batch system's) choice wins
        addr, ifname = os.environ["MASTER_ADDR"], None
    else:
        addr, ifname = ("127.0.0.1", None) if single_node else host_address()
    addr, port = comm.bcast((addr, free_port()) if comm.rank == 0 else None, root=0)
    env = {"MASTER_ADDR": addr, "MASTER_PORT": str(port)}
    if ifname and "GLOO_SOCKET_IFNAME" not in os.environ:
        env["GLOO_SOCKET_IFNAME"] = ifname
    os.environ.update(env)
    return env
