"""Checks of the launch, made before (or without) MPI: this process's rank from the launcher's
variables, and whether MPI's world is the job the launcher started."""

from __future__ import annotations

import os

from ..core.errors import MDLoaderError
from ..core.options import env as setting


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
    from mpi4py import MPI

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
