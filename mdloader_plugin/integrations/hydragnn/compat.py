"""The one place that knows where HydraGNN keeps things (3.0 on PyPI vs newer git versions).

HydraGNN 3.0 has flat modules (``hydragnn.utils.config_utils``, ``hydragnn.utils.distributed``,
``hydragnn.utils.tracer``, ...); later versions moved them into sub-packages
(``hydragnn.utils.input_config_parsing``, ``hydragnn.utils.distributed``,
``hydragnn.utils.print``, ``hydragnn.utils.datasets``, ``hydragnn.utils.profiling_and_tracing``).
Every HydraGNN function the integration calls is looked up here by name in a list of candidate
modules, first hit wins, so a version change means editing one table, not the driver.

It also owns the two things HydraGNN 3.0 gets wrong under a plain ``mpiexec``:

* ranks come only from ``OMPI_COMM_WORLD_*`` or ``SLURM_*`` (MPICH ranks all think they are 0):
  :func:`export_rank_env` sets the Open MPI names from MPI when neither is present;
* ``setup_ddp`` binds the fixed port 8889 (two jobs on a node collide): :func:`init_distributed`
  initialises ``torch.distributed`` on a free port chosen by rank 0 and broadcast over MPI, so
  ``setup_ddp`` finds it initialised and only records the environment.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Callable

from ...errors import ConfigError

# name -> modules to try, newest layout first.
_WHERE: dict[str, tuple[str, ...]] = {
    "setup_ddp": ("hydragnn.utils.distributed", "hydragnn.utils.distributed.distributed"),
    "get_distributed_model": ("hydragnn.utils.distributed",
                              "hydragnn.utils.distributed.distributed"),
    "setup_log": ("hydragnn.utils.print", "hydragnn.utils.print.print_utils",
                  "hydragnn.utils.print_utils"),
    "update_config": ("hydragnn.utils.input_config_parsing",
                      "hydragnn.utils.input_config_parsing.config_utils",
                      "hydragnn.utils.config_utils"),
    "save_config": ("hydragnn.utils.input_config_parsing",
                    "hydragnn.utils.input_config_parsing.config_utils",
                    "hydragnn.utils.config_utils"),
    "get_log_name_config": ("hydragnn.utils.input_config_parsing",
                            "hydragnn.utils.input_config_parsing.config_utils",
                            "hydragnn.utils.config_utils"),
    "select_optimizer": ("hydragnn.utils.optimizer", "hydragnn.utils.optimizer.optimizer"),
    "save_model": ("hydragnn.utils.model", "hydragnn.utils.model.model"),
    "get_summary_writer": ("hydragnn.utils.model", "hydragnn.utils.model.model"),
    "print_timers": ("hydragnn.utils.profiling_and_tracing.time_utils",
                     "hydragnn.utils.time_utils"),
    "create_model_config": ("hydragnn.models.create", "hydragnn.models"),
    "train_validate_test": ("hydragnn.train.train_validate_test", "hydragnn.train"),
    "create_dataloaders": ("hydragnn.preprocess.load_data", "hydragnn.preprocess"),
}

LOGGER_NAME = "hydragnn"  # the logger setup_log() attaches run.log and the console to


def hydragnn_version() -> str:
    """The installed HydraGNN's version string, or ``unknown``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("HydraGNN")
    except PackageNotFoundError:
        return "unknown"


def require_hydragnn() -> None:
    """Import HydraGNN or fail with one line saying how to install it."""
    try:
        importlib.import_module("hydragnn")
    except ImportError as exc:
        raise ConfigError(
            f"cannot import hydragnn ({exc}); install it with `pip install --no-deps "
            "hydragnn==3.0` plus matplotlib tqdm tensorboard ase scikit-learn psutil "
            "(see docs/hydragnn.md, 'Install route')") from None


def get(name: str) -> Callable[..., Any]:
    """HydraGNN's function `name`, from whichever module this version keeps it in."""
    tried = []
    for mod_name in _WHERE[name]:
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            tried.append(mod_name)
            continue
        fn = getattr(mod, name, None)
        if fn is not None:
            return fn
        tried.append(mod_name)
    raise ConfigError(f"HydraGNN {hydragnn_version()} has no {name} in any of "
                      f"{', '.join(tried)}; this MDLoader supports HydraGNN 3.0 and later layouts")


def setup_log(name: str) -> None:
    """HydraGNN's setup_log (logs/<name>/run.log + console), without the handlers an earlier run
    in this process attached (setup_log only ever adds them)."""
    import logging

    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    get("setup_log")(name)


def export_rank_env(rank: int, size: int) -> None:
    """Let HydraGNN 3.0 (which reads OMPI_COMM_WORLD_* or SLURM_*) see the MPI rank."""
    have_ompi = os.getenv("OMPI_COMM_WORLD_RANK") and os.getenv("OMPI_COMM_WORLD_SIZE")
    have_slurm = os.getenv("SLURM_NPROCS") and os.getenv("SLURM_PROCID")
    if have_ompi and int(os.environ["OMPI_COMM_WORLD_SIZE"]) == size:
        return
    if have_slurm and int(os.environ["SLURM_NPROCS"]) == size:
        return
    os.environ["OMPI_COMM_WORLD_RANK"] = str(rank)
    os.environ["OMPI_COMM_WORLD_SIZE"] = str(size)


def init_distributed(comm, single_node: bool) -> None:
    """Initialise torch.distributed (gloo on CPU) on a port rank 0 picks, then HydraGNN's DDP.

    `comm` is an mpi4py communicator spanning the job (collective call).
    """
    import torch
    import torch.distributed as dist

    rank, size = comm.Get_rank(), comm.Get_size()
    export_rank_env(rank, size)
    if not dist.is_initialized():
        from ...world import rendezvous_env

        env = rendezvous_env(comm, single_node)
        addr, port = env["MASTER_ADDR"], env["MASTER_PORT"]
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(size))
        backend = os.getenv("HYDRAGNN_BACKEND") or (
            "nccl" if torch.cuda.is_available() else "gloo")
        dist.init_process_group(backend=backend, init_method=f"tcp://{addr}:{port}",
                                rank=rank, world_size=size)
    get("setup_ddp")()  # finds the group initialised; records HydraGNN's environment only
