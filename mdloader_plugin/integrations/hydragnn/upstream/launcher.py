"""Run upstream HydraGNN's own training scripts, unmodified, with MDLoader serving their data.

``mpiexec -n N python -m mdloader_plugin.hydragnn SCRIPT [SCRIPT ARGS]`` (the same as
``mpiexec -n N mdloader run hydragnn SCRIPT [ARGS]``):

1. checks ``SCRIPT`` exists and refuses flag combinations MDLoader cannot honour
   (:func:`.hooks.refuse`), agreed across ranks: one line from rank 0, every rank exits 2,
   nothing started;
2. sets up what upstream's ``setup_ddp`` reads and gets wrong under a plain ``mpiexec``: the rank
   variables where neither Open MPI's nor Slurm's are set, and a free rendezvous port chosen by
   rank 0 (``HYDRAGNN_MASTER_ADDR``/``HYDRAGNN_MASTER_PORT``, unless the user set them), so two
   jobs on a node do not meet on upstream's fixed port 8889;
3. installs the hooks (:mod:`.hooks`): MDLoader's reader behind ``AdiosDataset`` and
   ``adios2_open`` where ADIOS2 is serial, MDLoader behind ``DistDataset`` and
   ``create_dataloaders`` (:mod:`.data`);
4. runs the script as ``__main__`` (``sys.argv`` and ``sys.path[0]`` as ``python SCRIPT`` sets
   them). An uncaught exception on any rank aborts the whole job, as ``python -m mpi4py`` does;
   an error every rank raises alike (a refused flag) is printed once and every rank exits 2.

Rank 0 prints one ``mdloader: launcher:`` line when the script creates its loaders: what was
replaced and what each data flag in use became (table: :data:`.hooks.FLAGS`,
docs/hydragnn-upstream-scripts.md). Each training epoch adds one ``MDLOADER-EPOCH`` line
(``run=<script name>``, ``loader=mdloader`` or ``hydragnn``) to the script's run.log.
"""

from __future__ import annotations

import os
import runpy
import sys

USAGE = ("usage: mpiexec -n N python -m mdloader_plugin.hydragnn SCRIPT [SCRIPT ARGS]\n"
         "  (or: mpiexec -n N mdloader run hydragnn SCRIPT [ARGS])\n"
         "Runs an upstream HydraGNN training script unmodified; with --ddstore, "
         "HYDRAGNN_USE_ddstore=1 or MDLOADER_REPLACE=all MDLoader serves its data.\n"
         "See docs/hydragnn-upstream-scripts.md.")


def main(argv: list[str] | None = None) -> int:
    """The launcher (see the module docstring); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    script, args = argv[0], argv[1:]
    from mpi4py import MPI

    from ....core.errors import MDLoaderError
    from ....mpi.agree import everywhere
    from ....mpi.world import abort_on_error, report_error

    comm = MPI.COMM_WORLD
    # rank-local checks (the script, arguments and variables may differ by rank: MPMD, a
    # node-local file system), agreed: an error on any rank is one line on every rank, said by
    # rank 0, exit 2, nothing started
    try:
        everywhere(comm, _check_script, script)
    except MDLoaderError as exc:
        return report_error(exc)
    with abort_on_error(comm):
        from . import data, hooks

        everywhere(comm, hooks.refuse, args)
        _rank_env(comm)
        everywhere(comm, _install, script, args)
        data.REPORT["argv"] = args
        data.REPORT["run"] = os.path.splitext(os.path.basename(script))[0]
        run_script(script, args)
    return 0


def _check_script(script: str) -> None:
    from ....core.errors import ConfigError

    if not os.path.isfile(script):
        raise ConfigError(f"{script}: no such script (relative paths start at {os.getcwd()}); "
                          "give the path of an upstream HydraGNN training script, e.g. "
                          "HydraGNN/examples/multibranch/train.py")


def _install(script: str, args: list[str]) -> None:
    from . import hooks

    hooks.install()
    hooks.check_inputfile(script, args)


def _rank_env(comm) -> None:
    """Rank variables and a rendezvous for upstream's ``setup_ddp`` (see the module docstring)."""
    from ....mpi.world import rendezvous_env
    from .. import compat

    compat.export_rank_env(comm.Get_rank(), comm.Get_size())
    if os.getenv("HYDRAGNN_MASTER_PORT") or os.getenv("SLURM_JOB_ID"):
        return  # the user's port, or upstream's own per-job port under Slurm
    from ....mpi.world import World

    world = World.detect(comm)
    env = rendezvous_env(comm, single_node=world.num_nodes == 1)
    os.environ.setdefault("HYDRAGNN_MASTER_ADDR", env["MASTER_ADDR"])
    os.environ["HYDRAGNN_MASTER_PORT"] = env["MASTER_PORT"]


def run_script(script: str, args: list[str]) -> None:
    """Run `script` as ``__main__`` with `args`, as ``python SCRIPT ARGS`` would."""
    path = os.path.abspath(script)
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(path))
    runpy.run_path(path, run_name="__main__")
