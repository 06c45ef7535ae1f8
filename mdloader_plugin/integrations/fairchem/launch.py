"""Run fairchem 2.x training on ranks started by ``mpiexec -n P`` or ``srun -n P``.

fairchem-core 2.23 and 2.24 start their own ranks: LOCAL mode with ``ranks_per_node > 1`` spawns
workers through torch elastic, with ``ranks_per_node == 1`` it overwrites ``RANK=0``; SLURM mode
submits a new job through submitit and refuses to run inside one. Each process that builds the
config also draws its own random ``timestamp_id`` (its own run directory). So ``mpiexec -n 4
fairchem -c cfg.yaml`` silently trains four separate one-rank jobs, and MDLoader's one-sided
backend, which needs MPI ranks, cannot run under fairchem's launcher at all.

This module is the other way round: MPI owns the ranks and fairchem is told about them.

1. ``mpi4py`` is imported first (MPI_Init before torch loads), ``OMP_NUM_THREADS`` defaults to 1
   (under srun torch would otherwise take every core per rank).
2. ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` come from ``COMM_WORLD`` and a
   shared-memory split; ``MASTER_ADDR`` is rank 0's host name and ``MASTER_PORT`` a free port
   rank 0 picks; both are broadcast.
3. Rank 0 alone builds the config with the function fairchem's CLI uses
   (``fairchem.core._cli.get_hydra_config_from_yaml``), forced to LOCAL mode with
   ``num_nodes x ranks_per_node = P`` and one ``timestamp_id`` (``job.run_name`` unless
   ``+job.timestamp_id=NAME`` is given, so the run directory is ``<run_dir>/<run_name>``),
   writes the canonical config and broadcasts it. Every rank then calls
   ``fairchem.core.launchers.slurm_launch.runner_wrapper``, which initialises
   torch.distributed (gloo on CPU, env:// from the variables above) itself.
4. Any exception on any rank prints one line and calls ``COMM_WORLD.Abort``: no rank is left
   waiting in a gloo or MPI collective.

Trade-off: fairchem's preemption/requeue machinery (submitit) is not used; checkpoints and
``job.runner_state_path`` resume still work because they live in the runner.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Sequence

from ...core.errors import ConfigError

LOG_NAME = "train.log"


def mpi_comm():
    """``COMM_WORLD``, initialising MPI before torch is imported."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from mpi4py import MPI

    return MPI.COMM_WORLD


def set_rank_env(comm) -> dict[str, str]:
    """Export the torch.distributed variables for this MPI rank; returns them."""
    from mpi4py import MPI

    from ...mpi.world import rendezvous_env

    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.rank)
    single_node = local.size == comm.size
    env = {"RANK": comm.rank, "WORLD_SIZE": comm.size, "LOCAL_RANK": local.rank,
           "LOCAL_WORLD_SIZE": local.size, **rendezvous_env(comm, single_node)}
    local.Free()
    env = {k: str(v) for k, v in env.items()}
    os.environ.update(env)
    return env


def build_config(config: str, overrides: Sequence[str], world_size: int, local_size: int):
    """The canonical fairchem config for a `world_size`-rank MPI job (call on one rank)."""
    from omegaconf import OmegaConf

    if not os.path.isfile(config):
        raise ConfigError(f"fairchem config {config!r} does not exist")
    if world_size % local_size:
        raise ConfigError(f"{world_size} ranks do not split evenly over nodes of {local_size} "
                          "ranks; use the same number of ranks on every node")
    forced = ["++job.scheduler.mode=LOCAL", f"++job.scheduler.num_nodes={world_size // local_size}",
              f"++job.scheduler.ranks_per_node={local_size}"]
    cfg = _compose(config, [*overrides, *forced])
    if not any(o.lstrip("+").startswith("job.timestamp_id=") for o in overrides):
        # one run directory <run_dir>/<run_name> for all ranks (fairchem: a random one a process)
        cfg = _compose(config, [*overrides, *forced, f"++job.timestamp_id={cfg.job.run_name}"])
    os.makedirs(cfg.job.metadata.log_dir, exist_ok=True)
    OmegaConf.save(cfg, cfg.job.metadata.config_path)
    return cfg


def _compose(config: str, overrides: list[str]):
    from fairchem.core._cli import get_hydra_config_from_yaml

    try:
        return get_hydra_config_from_yaml(config, overrides)
    except Exception as exc:  # hydra/omegaconf/fairchem: bad key, override or interpolation
        raise ConfigError(f"{config}: {_one_line(exc)}") from exc


def add_log_file(log_dir: str, rank: int) -> logging.Handler:
    """Copy this rank's log records to ``<log_dir>/train.log`` (rank 0) or ``train.rank<R>.log``
    (rewritten each run: ``mdloader compare-logs`` reads the rank-0 file)."""
    name = LOG_NAME if rank == 0 else f"train.rank{rank}.log"
    path = os.path.join(log_dir, name)
    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s: %(message)s",
                                           datefmt="%Y-%m-%d %H:%M:%S"))
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    root.addHandler(handler)
    return handler


def run(config: str, overrides: Sequence[str] = ()) -> int:
    """Train with fairchem on the MPI ranks of this job; returns 0 (errors abort the job)."""
    comm = mpi_comm()
    try:
        env = set_rank_env(comm)
        cfg, err = None, None
        if comm.rank == 0:
            try:
                cfg = build_config(config, list(overrides), comm.size, int(env["LOCAL_WORLD_SIZE"]))
            except Exception as exc:  # noqa: BLE001 - reported on every rank below
                err = exc
        cfg, err_line = comm.bcast((cfg, None if err is None else _one_line(err)))
        if err_line is not None:
            if err is not None:
                raise err
            return 2
        handler = add_log_file(cfg.job.metadata.log_dir, comm.rank)
        try:
            _train(cfg, comm)
        finally:
            logging.getLogger().removeHandler(handler)
            handler.close()
        return 0
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - one line, then take the whole job down
        from ...mpi.world import report_error

        code = report_error(exc)
        if comm.size > 1:
            sys.stdout.flush()
            sys.stderr.flush()
            comm.Abort(code or 1)
        return code or 1


def _train(cfg, comm) -> None:
    from fairchem.core.launchers.slurm_launch import runner_wrapper

    from .loader import close_all

    if comm.rank == 0:
        logging.info("mdloader: fairchem run %s on %d MPI ranks, run dir %s", cfg.job.run_name,
                     comm.size, os.path.join(cfg.job.run_dir, cfg.job.timestamp_id))
    runner_wrapper(cfg)
    close_all()  # collective, same order on every rank: frees this run's windows


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
