"""Topology of the job, detected once: ranks, nodes, and a private communicator.

MDLoader never talks on the user's communicator: `World.detect()` duplicates it, so library
traffic cannot match the trainer's messages. Ranks that share a node (``MPI_COMM_TYPE_SHARED``)
form a node; `node_of` maps every rank to its node index, which backends and cost models use to
tell cheap intra-node transfers from network ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# The package's other MPI helpers, importable from here as before the split (one idea a module:
# launch checks, collectives, errors and aborts, torch's rendezvous).
from . import failing
from .abort import _abort, _user_error, abort_on_error, report_error  # noqa: F401
from .collectives import agree, allreduce_number  # noqa: F401
from .launch_checks import (  # noqa: F401
    _RANK_VARS, _SIZE_VARS, LaunchError, _env_int, _env_rank, _world_size_env, check_launch,
    launched_size, rank_prefix)
from .rendezvous import free_port, host_address, rendezvous_env  # noqa: F401


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
            from mpi4py import MPI

            MPI.COMM_WORLD.Abort(code)  # the job (an Abort of a duplicate may end one rank)
        raise SystemExit(code)

    def close(self) -> None:
        """Free the private communicator (collective); while an exception propagates on several
        ranks, the failing way instead (:mod:`.failing`: this rank's line, ``MPI_Abort``)."""
        exc = failing.propagating()
        if exc is not None and self.size > 1:
            failing.fail(exc)
        MPI = _mpi()
        if self.comm is not None and self.comm != MPI.COMM_NULL and not MPI.Is_finalized():
            self.comm.Free()
        self.comm = None
