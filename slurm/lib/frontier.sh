# shellcheck shell=bash
# shellcheck disable=SC2034  # SITE_*, GPUS_PER_NODE and LAUNCH are read by lib/common.sh
# Frontier (OLCF): 4 AMD MI250X a node = 8 GCDs (each its own GPU to software), 4 Slingshot-11
# NICs, 64 cores of which 56 are usable (low-noise mode reserves one a L3 region); Cray MPICH
# over libfabric (cxi). Sourced by slurm/frontier-*.sbatch.
#
# Defines the site's GPUs per node, default modules and profile path, the Cray MPICH settings
# MDLoader's one-sided backend needs (each with why), and `site_launcher N` which fills the
# array LAUNCH with the srun line for N nodes, one rank a GCD.

SITE=frontier
GPUS_PER_NODE=8
CPUS_PER_TASK=7  # 56 usable cores / 8 ranks: one L3 region (and its closest GCD) a rank
SITE_MODULES="PrgEnv-gnu cray-mpich rocm craype-accel-amd-gfx90a cray-python"
SITE_PROFILE=${MEMBERWORK:-$HOME}/mdloader/frontier-profile.json

site_env() {
    # Passive-target Gets must complete while the target rank sits in RCCL's gradient allreduce
    # (not MPI): without a progress thread such a Get can wait for the target's next MPI call,
    # or deadlock (seen with 3 ranks on CPU, see FACTS.md).
    mdl_export MPICH_ASYNC_PROGRESS=1
    # The progress thread needs MPI_THREAD_MULTIPLE, which Cray MPICH grants only when allowed.
    mdl_export MPICH_MAX_THREAD_SAFETY=multiple
    # Four NICs, eight ranks a node: each rank uses the NIC attached to its own NUMA domain,
    # where its host buffers live, two ranks a NIC.
    mdl_export MPICH_OFI_NIC_POLICY=NUMA
    # MDLoader's windows and Alltoallv buffers are host memory: GPU-aware MPI is not needed
    # (enabling it would also require the GTL library to be linked into mpi4py).
    mdl_export MPICH_GPU_SUPPORT_ENABLED=0
    # MPICH_RMA_OVER_DMAPP is deliberately not set: it applies to Aries (Cray XC) only.
    # The collective backend's Alltoallv at thousands of ranks can overflow the NIC's hardware
    # message matching; hybrid mode falls back to software matching instead of failing.
    mdl_export FI_CXI_RX_MATCH_MODE=hybrid
    # One CPU thread a rank for torch (the loader decodes on the main thread, no fork workers).
    mdl_export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
}

# One rank a GCD: 7 cores a rank and the GCD closest to them (OLCF's recommended mapping).
site_launcher() {
    local nodes=$1
    LAUNCH=(srun --nodes="$nodes" --ntasks="$((nodes * GPUS_PER_NODE))"
            --ntasks-per-node="$GPUS_PER_NODE" --cpus-per-task="$CPUS_PER_TASK"
            --cpu-bind=cores --gpus-per-task=1 --gpu-bind=closest)
}
