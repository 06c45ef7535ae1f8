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
# One rank a GPU (site_launcher in lib/cray.sh). If NCCL reports peer-to-peer disabled with one
# visible GPU a rank, use `--gpus-per-node=4 --gpu-bind=none` there instead and let the trainer
# pick cuda:<local rank>.
# shellcheck source-path=SCRIPTDIR source=cray.sh
source "$(dirname "${BASH_SOURCE[0]}")/cray.sh"
