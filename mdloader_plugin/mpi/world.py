"""Topology of the job, detected once: ranks, nodes, and a private communicator.

MDLoader never talks on the user's communicator: `World.detect()` duplicates it, so library
traffic cannot match the trainer's messages. Ranks that share a node (``MPI_COMM_TYPE_SHARED``)
form a node; `node_of` maps every rank to its node index, which backends and cost models use to
tell cheap intra-node transfers from network ones.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from dataclasses import dataclass, field

import numpy as np

from ..core.errors import MDLoaderError
from ..core.options import env as setting


def _mpi():
    from mpi4py import MPI  # imported lazily: codec/sampler/sources users never need MPI

    return MPI


@dataclass
class World:
    """This rank's view of the job."""

    comm: object
    rank: int
    size: int
    node_of: np.ndarray = field(repr=False)  # node index of every rank
    local_rank: int = 0
    local_size: int = 1

    @property
    def num_nodes(self) -> int:
        return int(self.node_of.max()) + 1 if self.size else 0

    @classmethod
    def detect(cls, comm=None) -> "World":
        """Duplicate `comm` (default ``COMM_WORLD``) and find which ranks share a node."""
        MPI = _mpi()
        base = MPI.COMM_WORLD if comm is None else comm
        priv = base.Dup()
        local = priv.Split_type(MPI.COMM_TYPE_SHARED, key=priv.rank)
        leader = priv.allgather(priv.rank if local.rank == 0 else -1)
        leaders = sorted(r for r in leader if r >= 0)
        my_leader = local.bcast(priv.rank if local.rank == 0 else None, root=0)
        node_ids = np.asarray(priv.allgather(leaders.index(my_leader)), dtype=np.int64)
        world = cls(priv, priv.rank, priv.size, node_ids, local.rank, local.size)
        local.Free()
        return world

    def abort(self, code: int = 1) -> None:
        """Abort every rank of the job (never returns when size > 1)."""
        if self.size > 1:
            self.comm.Abort(code)
        raise SystemExit(code)

    def close(self) -> None:
        MPI = _mpi()
        if self.comm is not None and self.comm != MPI.COMM_NULL and not MPI.Is_finalized():
            self.comm.Free()
        self.comm = None


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


_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")


def rank_prefix() -> str:
    """'[rank r] ' when running under MPI with more than one rank, else ''."""
    return f"[rank {_env_rank()}] " if _world_size_env() > 1 else ""


def _env_int(names: tuple[str, ...], default: int) -> int:
    """The first of the launcher's variables `names` that holds an integer (MPI not needed)."""
    for var in names:
        try:
            return int(os.environ[var])
        except (KeyError, ValueError):
            pass
    return default


class LaunchError(MDLoaderError):
    """MPI's world disagrees with the number of processes the launcher started."""


def launched_size(environ=None) -> tuple[str, int] | None:
    """(variable, value): how many processes the launcher says it started, or None when no
    launcher says (a plain ``python``, or a batch script's own shell).

    An ``mpiexec``'s own variable is trusted before Slurm's: under ``mpiexec`` inside a job, the
    ``SLURM_*`` numbers a process inherits describe the launcher's daemons, not the ranks. A
    task ``srun`` started directly carries ``SLURM_STEP_NUM_TASKS`` (the step's tasks) and
    ``SLURM_PROCID``; ``SLURM_NTASKS`` is named when it says the same."""
    env = os.environ if environ is None else environ
    if str(env.get("OMPI_COMM_WORLD_SIZE", "")).isdigit():
        return "OMPI_COMM_WORLD_SIZE", int(env["OMPI_COMM_WORLD_SIZE"])
    pmi, step = str(env.get("PMI_SIZE", "")), str(env.get("SLURM_STEP_NUM_TASKS", ""))
    if step.isdigit() and "SLURM_PROCID" in env and pmi in ("", step):  # srun's own tasks
        var = "SLURM_NTASKS" if env.get("SLURM_NTASKS") == step else "SLURM_STEP_NUM_TASKS"
        return var, int(step)
    if pmi.isdigit():  # MPICH's mpiexec (hydra), also when its proxies are srun tasks
        return "PMI_SIZE", int(pmi)
    return None


def check_launch(comm=None, environ=None) -> None:
    """Raise :class:`LaunchError` (on every process, without a collective) when the MPI world
    size differs from what the launcher started: typically mpi4py built against another MPI
    than the launcher's, so ``srun -n 64`` gives 64 one-rank jobs that each train alone.
    ``MDLOADER_LAUNCH_CHECK=0`` skips the check."""
    if str(setting("MDLOADER_LAUNCH_CHECK")) == "0":
        return
    found = launched_size(environ)
    if found is None:
        return
    var, n = found
    MPI = _mpi()
    size = (MPI.COMM_WORLD if comm is None else comm).Get_size()
    if size == n:
        return
    lib = MPI.Get_library_version().strip().splitlines()[0].split(",")[0][:40]
    err = LaunchError(
        f"MPI world size {size} but {var}={n}: the launcher started {n} processes that MPI does "
        f"not see as one job; mpi4py is likely built against another MPI ({lib}) than the "
        "launcher's: rebuild it on the site's MPI (Cray: MPICC=\"cc -shared\" pip install "
        "--force-reinstall --no-binary=mpi4py mpi4py) or launch with that MPI's mpiexec "
        "(MDLOADER_LAUNCH_CHECK=0 skips this check)")
    err.agreed = True  # every process finds the same: the launcher's rank 0 says it once
    raise err


def _env_rank() -> int:
    return _env_int(_RANK_VARS, 0)


def _world_size_env() -> int:
    return _env_int(_SIZE_VARS, 1)


def allreduce_number(comm, value, op: str = "sum"):
    """`value` (an int or a float) reduced over `comm` with ``"sum"``, ``"max"`` or ``"min"``, by
    a buffer ``Allreduce``: the rank's other Python threads keep running while it waits.

    mpi4py's pickle-based ``comm.allreduce`` (and ``reduce``/``scan``) creates a hidden duplicate
    of the communicator on its first call there, collectively, **holding the GIL while it waits**
    for the other ranks (measured, mpi4py 4.1.2 + Open MPI 5.0.11: another thread of the waiting
    rank ran once in 1 s during the first call, ~900 times during later ones). A rank waiting
    there freezes its producer thread, its progress thread and the trainer: if another rank needs
    any of them before it can join (an exchange, a Get's target progress), the job hangs
    (seen on the emulated cluster: one rank in its first ``Win.Get`` of a loader while the
    others sat in an allreduce; tests/mpi_scripts/first_allreduce_gil.py)."""
    from mpi4py import MPI

    ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}
    is_int = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    buf = np.array([value], dtype=np.int64 if is_int else np.float64)
    out = np.empty_like(buf)
    comm.Allreduce(buf, out, op=ops[op])
    return int(out[0]) if is_int else float(out[0])


def agree(world, fn, *args, **kwargs):
    """Run ``fn`` on every rank, then agree: if it failed anywhere, raise on every rank.

    Use it around rank-local work that precedes a collective (reading this rank's block, say), so
    a failure on one rank becomes the same clean error everywhere instead of a hang. The error is
    re-raised as an :class:`MDLoaderError` marked ``agreed`` (rank 0 prints it, every rank exits
    non-zero); a failure that is not a user error is re-raised as it was on the failing rank.
    """
    err: BaseException | None = None
    result = None
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - reported to every rank below
        err = exc
    if world is None or world.size == 1:
        if err is not None:
            raise err
        return result
    mine = None if err is None else (type(err).__name__, str(err), isinstance(err, MDLoaderError))
    states = world.comm.allgather(mine)
    failed = [(r, s) for r, s in enumerate(states) if s is not None]
    if not failed:
        return result
    r, (kind, msg, user) = failed[0]
    if not user and err is not None and world.rank == r:
        raise err
    new = (type(err) if isinstance(err, MDLoaderError) and world.rank == r else MDLoaderError)(
        msg if user else f"rank {r} failed: {kind}: {msg}")
    new.agreed = True
    raise new


def report_error(exc: BaseException) -> int:
    """Print one line for a user error (a traceback for a bug) and return the exit code.

    A user error wrapped by a framework (Hydra's ``InstantiationException`` around a loader's
    ``ConfigError``) is reported as the user error it wraps."""
    exc = _user_error(exc) or exc
    if isinstance(exc, MDLoaderError):
        if getattr(exc, "agreed", False):  # the same error on every rank: say it once
            if _env_rank() == 0:
                print(f"mdloader: error: {exc}", file=sys.stderr, flush=True)
            return exc.exit_code
        print(f"mdloader: error: {rank_prefix()}{exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        print(f"mdloader: interrupted {rank_prefix()}".rstrip(), file=sys.stderr, flush=True)
        return 130
    traceback.print_exception(exc, file=sys.stderr)
    print(f"mdloader: error: {rank_prefix()}unexpected {type(exc).__name__}: {exc}",
          file=sys.stderr, flush=True)
    return 1


def _user_error(exc: BaseException | None) -> MDLoaderError | None:
    """The :class:`MDLoaderError` in `exc`'s cause/context chain, if any."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, MDLoaderError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


@contextlib.contextmanager
def abort_on_error(comm=None):
    """Turn an exception on any one rank into an abort of the whole job.

    An MPI job must never hang: a rank that fails while the others wait in a collective or a
    one-sided epoch would leave them waiting until the allocation runs out. The error is
    printed as one line (with the rank), then ``MPI_Abort`` ends every rank with the same code.
    """
    try:
        yield
    except SystemExit as exc:
        if exc.code not in (0, None):
            _abort(comm, exc.code if isinstance(exc.code, int) else 1)
        raise
    except BaseException as exc:  # noqa: BLE001 - any failure must end the job
        code = report_error(exc)
        if not getattr(exc, "agreed", False):  # an agreed error is raised on every rank alike
            _abort(comm, code)
        raise SystemExit(code) from None


def _abort(comm, code: int) -> None:
    if _world_size_env() <= 1 and comm is None:
        return
    MPI = _mpi()
    target = comm if comm is not None else MPI.COMM_WORLD
    if target.Get_size() > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        target.Abort(code)
