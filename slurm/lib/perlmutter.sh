# shellcheck shell=bash
# shellcheck disable=SC2034  # SITE_*, GPUS_PER_NODE and LAUNCH are read by lib/common.sh
# Perlmutter GPU nodes (NERSC): 4 NVIDIA A100, 4 Slingshot-11 NICs, 64 cores (128 hardware
# threads) a node; Cray MPICH over libfabric (cxi). Sourced by slurm/perlmutter-*.sbatch.
#
# Defines the site's GPUs per node, default modules and profile path, the Cray MPICH settings
# MDLoader's one-sided backend needs (each with why), and `site_launcher N` which fills the
# array LAUNCH with the srun line for N nodes, one rank a GPU.

SITE=perlmutter
GPUS_PER_NODE=4
CPUS_PER_TASK=32  # 128 hardware threads / 4 ranks; --cpu-bind=cores keeps them on 16 cores
SITE_MODULES="PrgEnv-gnu cray-mpich cudatoolkit craype-accel-nvidia80 python"
SITE_PROFILE=${SCRATCH:-$HOME}/mdloader/perlmutter-profile.json

site_env() {
    # Passive-target Gets must complete while the target rank sits in NCCL's gradient allreduce
    # (not MPI): without a progress thread such a Get can wait for the target's next MPI call,
    # or deadlock (seen with 3 ranks on CPU, see FACTS.md).
    mdl_export MPICH_ASYNC_PROGRESS=1
    # The progress thread needs MPI_THREAD_MULTIPLE, which Cray MPICH grants only when allowed.
    mdl_export MPICH_MAX_THREAD_SAFETY=multiple
    # Four NICs a node: use the one on the rank's own NUMA domain, where its host buffers live
    # (the default BLOCK policy can send a rank's RMA traffic through a NIC across the socket).
    mdl_export MPICH_OFI_NIC_POLICY=NUMA
    # MDLoader's windows and Alltoallv buffers are host memory: GPU-aware MPI is not needed, and
    # its device-pointer checks would only add latency to every RMA call.
    mdl_export MPICH_GPU_SUPPORT_ENABLED=0
    # MPICH_RMA_OVER_DMAPP is deliberately not set: it applies to Aries (Cray XC) only.
    # The collective backend's Alltoallv at thousands of ranks can overflow the NIC's hardware
    # message matching; hybrid mode falls back to software matching instead of failing.
    mdl_export FI_CXI_RX_MATCH_MODE=hybrid
    # One CPU thread a rank for torch (the loader decodes on the main thread, no fork workers).
    mdl_export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
}

# One rank a GPU, each pinned to its cores and to the GPU closest to them (same NUMA domain as
# its NIC). If NCCL reports peer-to-peer disabled with one visible GPU a rank, use
# `--gpus-per-node=4 --gpu-bind=none` instead and let the trainer pick cuda:<local rank>.
site_launcher() {
    local nodes=$1
    LAUNCH=(srun --nodes="$nodes" --ntasks="$((nodes * GPUS_PER_NODE))"
            --ntasks-per-node="$GPUS_PER_NODE" --cpus-per-task="$CPUS_PER_TASK"
            --cpu-bind=cores --gpus-per-task=1 --gpu-bind=closest)
}
