# shellcheck shell=bash
# shellcheck disable=SC2034  # SITE_*, GPUS_PER_NODE and LAUNCH are read by lib/common.sh
# Frontier (OLCF): 4 AMD MI250X a node = 8 GCDs (each its own GPU to software, all linked by
# xGMI), 4 Slingshot-11 NICs, 64 cores of which 56 are usable (low-noise mode reserves the first
# core of each 8-core L3 region); Cray MPICH over libfabric (cxi). Sourced by
# slurm/frontier-*.sbatch.
#
# Defines the site's GPUs per node, default modules, scratch paths and profile path, the
# CPU/GPU binding, the RCCL set-up for Slingshot (site_ccl_env), then the Cray MPICH settings
# and the srun line shared with Perlmutter (lib/cray.sh).

SITE=frontier
GPUS_PER_NODE=8
CPUS_PER_TASK=7  # 56 usable cores / 8 ranks: one L3 region (and its closest GCD) a rank
# Check OLCF's current docs for these names (rocm's version changes with the system software).
SITE_MODULES="PrgEnv-gnu cray-mpich rocm craype-accel-amd-gfx90a cray-python"
# $MEMBERWORK/<project>: Frontier sets no $SCRATCH; the project is the job's account.
_project=${SLURM_JOB_ACCOUNT:-${SBATCH_ACCOUNT:-project}}
SITE_SCRATCH=${MEMBERWORK:-$HOME}/${_project,,}/mdloader
SITE_PROFILE=$SITE_SCRATCH/frontier-profile.json
# Every rank sees all eight GCDs (no --gpus-per-task, --gpu-bind=none), so RCCL keeps xGMI
# peer-to-peer between them; the trainers take GCD <local rank>. Rank i runs on the 7 usable
# cores of the L3 region closest to GCD i (GCD 0-7: cores 49-55, 57-63, 17-23, 25-31, 1-7,
# 9-15, 33-39, 41-47; check the node diagram in OLCF's Frontier user guide).
SITE_CPU_BIND=mask_cpu:0xfe000000000000,0xfe00000000000000,0xfe0000,0xfe000000,0xfe,0xfe00,0xfe00000000,0xfe0000000000
SITE_GPU_BIND=none

# RCCL over Slingshot (OLCF's settings for PyTorch with the aws-ofi-rccl plugin; check their
# current docs). The plugin is built by the user or the project (OLCF documents the build);
# point MDLOADER_CCL_PLUGIN_DIR at its lib/ folder. Without it RCCL falls back to TCP sockets.
site_ccl_env() {
    # with the plugin found, NCCL must use it (an error, not a silent fall-back to sockets)
    if mdl_ccl_plugin librccl-net; then mdl_export NCCL_NET="AWS Libfabric"; fi
    mdl_export NCCL_SOCKET_IFNAME=hsn0 GLOO_SOCKET_IFNAME=hsn0 NCCL_CROSS_NIC=1 \
        NCCL_NET_GDR_LEVEL=3 FI_CXI_ATS=0
    # libfabric for RCCL, as OLCF documents it ("PyTorch on Frontier", RCCL Libfabric plugin,
    # docs.olcf.ornl.gov/software/analytics/pytorch_frontier.html; the same three values in
    # HydraGNN's Frontier job environment, scripts/hpc/olcf/frontier/environments/interactive.sh):
    # kdreg2, Frontier's default memory-registration cache monitor since Slingshot 2.3 (memhooks
    # can deadlock with the plugin); larger completion and transmit queues for thousands of
    # peers. FI_CXI_RX_MATCH_MODE=hybrid, also on their list, is set for MPI in lib/cray.sh.
    # OLCF's FI_CXI_RDZV_* settings (every message by rendezvous) are left out: they apply to
    # every libfabric user of the process, Cray MPICH's small RMA and Alltoallv messages too.
    mdl_export FI_MR_CACHE_MONITOR=kdreg2 FI_CXI_DEFAULT_CQ_SIZE=131072 \
        FI_CXI_DEFAULT_TX_SIZE=2048 FI_CXI_DISABLE_HOST_REGISTER=1 HSA_FORCE_FINE_GRAIN_PCIE=1
    # MIOpen's kernel cache in node-local /tmp (a shared one in $HOME locks across ranks)
    mdl_export MIOPEN_USER_DB_PATH=/tmp/miopen-${USER:-mdloader} \
        MIOPEN_CUSTOM_CACHE_DIR=/tmp/miopen-${USER:-mdloader}
}
# shellcheck source-path=SCRIPTDIR source=cray.sh
source "$(dirname "${BASH_SOURCE[0]}")/cray.sh"
