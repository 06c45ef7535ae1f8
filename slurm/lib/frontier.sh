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
# 7 cores a rank: one L3 region and its closest GCD (OLCF's recommended mapping); two ranks
# share each of the four NICs.
# shellcheck source-path=SCRIPTDIR source=cray.sh
source "$(dirname "${BASH_SOURCE[0]}")/cray.sh"
