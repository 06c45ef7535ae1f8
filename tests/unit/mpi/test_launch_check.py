"""The start-up check that MPI's world is what the launcher started (``world.check_launch``): which
launcher variable it trusts, the one line it prints, exit 2. The real cases run elsewhere: srun
with the wrong MPI on the one-node Slurm (test_slurm_recipes.py) and the MPICH wheel's mpiexec
starting ranks whose mpi4py loads Open MPI (test_mpich.py)."""

from __future__ import annotations

import pytest

from mdloader_plugin.mpi.world import LaunchError, check_launch, launched_size

SRUN = {"SLURM_NTASKS": "4", "SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "2"}


@pytest.mark.parametrize("environ,expected", [
    ({}, None),
    ({"SLURM_NTASKS": "8", "SLURM_PROCID": "0"}, None),  # a batch script's own shell
    (SRUN, ("SLURM_NTASKS", 4)),
    ({**SRUN, "PMI_SIZE": "4"}, ("SLURM_NTASKS", 4)),  # srun --mpi=pmi2
    ({**SRUN, "SLURM_NTASKS": "8"}, ("SLURM_STEP_NUM_TASKS", 4)),
    # mpiexec inside a job: its daemons are srun tasks, the ranks are the mpiexec's
    ({"SLURM_NTASKS": "2", "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "0", "PMI_SIZE": "8"},
     ("PMI_SIZE", 8)),
    ({**SRUN, "OMPI_COMM_WORLD_SIZE": "16"}, ("OMPI_COMM_WORLD_SIZE", 16)),
])
def test_launched_size(environ, expected):
    assert launched_size(environ) == expected


def test_mismatch_is_one_line_naming_both_and_the_cause(monkeypatch):
    from mpi4py import MPI

    monkeypatch.delenv("MDLOADER_LAUNCH_CHECK", raising=False)
    check_launch(MPI.COMM_SELF, {"SLURM_STEP_NUM_TASKS": "1", "SLURM_PROCID": "0"})
    with pytest.raises(LaunchError) as err:
        check_launch(MPI.COMM_SELF, SRUN)
    msg = str(err.value)
    assert "\n" not in msg and err.value.exit_code == 2
    assert msg.startswith("MPI world size 1 but SLURM_NTASKS=4: ")
    assert "mpi4py is likely built against another MPI" in msg
    monkeypatch.setenv("MDLOADER_LAUNCH_CHECK", "0")
    check_launch(MPI.COMM_SELF, SRUN)
