# shellcheck shell=bash
# shellcheck disable=SC2034  # SITE_*, GPUS_PER_NODE and LAUNCH are read by lib/common.sh
# Perlmutter GPU nodes (NERSC): 4 NVIDIA A100 (NVLink between all four), 4 Slingshot-11 NICs,
# 64 cores (128 hardware threads) in 4 NUMA domains a node; Cray MPICH over libfabric (cxi).
# Sourced by slurm/perlmutter-*.sbatch.
#
# Defines the site's GPUs per node, default modules, scratch paths and profile path, the
# CPU/GPU binding, the NCCL set-up for Slingshot (site_ccl_env), then the Cray MPICH settings
# and the srun line shared with Frontier (lib/cray.sh).

SITE=perlmutter
GPUS_PER_NODE=4
CPUS_PER_TASK=32  # 128 hardware threads / 4 ranks: one NUMA domain (16 cores, 32 threads) a rank
# Check NERSC's current docs for these names: the `nccl` module is the one NERSC documents as
# carrying the aws-ofi-nccl (Slingshot) plugin for pip-installed PyTorch.
SITE_MODULES="PrgEnv-gnu cray-mpich cudatoolkit craype-accel-nvidia80 python nccl"
# Scratch (not the checkout): data, the calibrated profile, logs/ and runs/ of every job.
SITE_SCRATCH=${PSCRATCH:-${SCRATCH:-$HOME}}/mdloader
SITE_PROFILE=$SITE_SCRATCH/perlmutter-profile.json
# Every rank sees all four GPUs (no --gpus-per-task, --gpu-bind=none), so NCCL keeps NVLink
# peer-to-peer between them; the trainers take cuda:<local rank>. GPU i is attached to NUMA
# domain 3-i (check NERSC's "Perlmutter GPU affinity" docs), so rank i is bound to domain 3-i.
SITE_CPU_BIND=map_ldom:3,2,1,0
SITE_GPU_BIND=none

# NCCL over Slingshot (NERSC's settings for NCCL with the aws-ofi-nccl plugin; check their
# current docs). Without the plugin NCCL silently falls back to TCP sockets.
site_ccl_env() {
    # with the plugin found, NCCL must use it (an error, not a silent fall-back to sockets)
    if mdl_ccl_plugin libnccl-net; then mdl_export NCCL_NET="AWS Libfabric"; fi
    mdl_export NCCL_SOCKET_IFNAME=hsn NCCL_CROSS_NIC=1 NCCL_NET_GDR_LEVEL=PHB
    mdl_export FI_CXI_DISABLE_HOST_REGISTER=1 FI_MR_CACHE_MONITOR=userfaultfd \
        FI_CXI_DEFAULT_CQ_SIZE=131072
}
# shellcheck source-path=SCRIPTDIR source=cray.sh
source "$(dirname "${BASH_SOURCE[0]}")/cray.sh"
