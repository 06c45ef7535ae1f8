# shellcheck shell=bash
# shellcheck disable=SC2034  # LAUNCH is read by lib/common.sh
# Cray MPICH settings and the one-rank-a-GPU srun line shared by the HPE/Cray sites
# (Perlmutter, Frontier). Sourced by slurm/lib/<site>.sh after it set GPUS_PER_NODE and
# CPUS_PER_TASK.

site_env() {
    # Passive-target Gets must complete while the target rank sits in NCCL's/RCCL's gradient
    # allreduce (not MPI). Inside a node a Get from MDLoader's Win_allocate window is a
    # shared-memory load; across nodes MDLoader runs its own progress thread, which needs
    # MPI_THREAD_MULTIPLE, granted by Cray MPICH only when allowed. MPICH_ASYNC_PROGRESS=1 is not
    # needed and stays off (MPICH's default): with the MPICH wheel it made fetches slower on one
    # host and across emulated hosts (docs/how-it-works.md, "Progress guarantee"; not yet measured
    # on Cray MPICH: export it before sbatch to turn it on for a job).
    mdl_export MPICH_MAX_THREAD_SAFETY=multiple
    # Four NICs a node: each rank uses the NIC on its own NUMA domain, where its host buffers
    # live (the default BLOCK policy can send a rank's RMA traffic through a NIC across the socket).
    mdl_export MPICH_OFI_NIC_POLICY=NUMA
    # MDLoader's windows and Alltoallv buffers are host memory: GPU-aware MPI is not needed (its
    # device-pointer checks would add latency to every RMA call, and it needs the GTL library
    # linked into mpi4py).
    mdl_export MPICH_GPU_SUPPORT_ENABLED=0
    # MPICH_RMA_OVER_DMAPP is deliberately not set: it applies to Aries (Cray XC) only.
    # The collective backend's Alltoallv at thousands of ranks can overflow the NIC's hardware
    # message matching; hybrid mode falls back to software matching instead of failing.
    mdl_export FI_CXI_RX_MATCH_MODE=hybrid
    # One CPU thread a rank for torch (the loader decodes on the main thread, no fork workers).
    mdl_export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
    # The trainers' gradient allreduce: NCCL (Perlmutter) / RCCL (Frontier) over Slingshot.
    site_ccl_env
}

# One rank a GPU (GCD): every rank sees all the node's GPUs (peer-to-peer over NVLink/xGMI
# stays on for NCCL/RCCL) and takes the one of its local rank; its cores are the ones closest to
# that GPU (SITE_CPU_BIND). --kill-on-bad-exit=1: a rank that dies ends the step at once
# instead of leaving the others waiting (MDLoader's fetch watchdog would take 600 s).
site_launcher() {
    local nodes=$1
    LAUNCH=(srun --kill-on-bad-exit=1 --nodes="$nodes" --ntasks="$((nodes * GPUS_PER_NODE))"
            --ntasks-per-node="$GPUS_PER_NODE" --cpus-per-task="$CPUS_PER_TASK"
            --cpu-bind="$SITE_CPU_BIND" --gpus-per-node="$GPUS_PER_NODE"
            --gpu-bind="$SITE_GPU_BIND")
}
