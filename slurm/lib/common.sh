# shellcheck shell=bash
# Shared by the batch recipes in slurm/: locating the checkout, run-or-print (dry run), module
# loading, the calibrate-once step and the training launch. Sourced, never run.
#
# Every recipe builds its launcher as a bash array (srun with binding flags, or mpiexec) and calls
# `mdl_train FRAMEWORK LOADER LAUNCHER...`. With MDLOADER_DRY_RUN=1 nothing is executed: each
# command is printed on one line, starting with "+ ", shell-quoted so it can be pasted back.
#
# Environment (all optional):
#   MDLOADER_ROOT      the MDLoader checkout (default: the sbatch submit directory, else the
#                      folder above this script)
#   MDLOADER_VENV      its virtual environment (default: $MDLOADER_ROOT/.venv)
#   MDLOADER_CONFIG    training config (default: set by each recipe)
#   MDLOADER_SET       extra config overrides, space separated KEY=VALUE (passed as --set
#                      KEY=VALUE to HydraGNN, as Hydra overrides to fairchem)
#   MDLOADER_RUN_NAME  run name prefix; a run is <prefix>-<loader> (HydraGNN: logs/<run>/run.log,
#                      fairchem: job.run_name)  [<framework>-<site>-<job id>]
#   MDLOADER_DRY_RUN   1: print the commands instead of running them
#   MDLOADER_PROFILE_CACHE  machine profile written by the calibrate-once step

mdl_die() { echo "mdloader-recipe: error: $*" >&2; exit 2; }
mdl_note() { echo "mdloader-recipe: $*" >&2; }
mdl_dry() { [[ ${MDLOADER_DRY_RUN:-0} == 1 ]]; }

# Print a command (dry run) or run it.
mdl_run() {
    if mdl_dry; then
        printf '+'
        printf ' %q' "$@"
        printf '\n'
    else
        "$@"
    fi
}

# Export NAME=VALUE (and show it in a dry run, so the printout is the whole recipe).
mdl_export() {
    local kv
    for kv in "$@"; do
        export "${kv?}"
        mdl_dry && printf '+ export %q\n' "$kv"
    done
    return 0
}

# ROOT, PY and the absolute CONFIG, checked (paths are only reported in a dry run).
mdl_setup() {
    local default_config=$1 here
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    ROOT=${MDLOADER_ROOT:-${SLURM_SUBMIT_DIR:-$here}}
    if [[ ! -f $ROOT/mdloader_plugin/__init__.py ]]; then
        if [[ -f $here/mdloader_plugin/__init__.py ]]; then
            ROOT=$here
        else
            mdl_die "no MDLoader checkout at $ROOT; submit from its root or set MDLOADER_ROOT"
        fi
    fi
    VENV=${MDLOADER_VENV:-$ROOT/.venv}
    PY=$VENV/bin/python
    CONFIG=${MDLOADER_CONFIG:-$default_config}
    [[ $CONFIG == /* ]] || CONFIG=$ROOT/$CONFIG
    mdl_dry && return 0
    [[ -x $PY ]] || mdl_die "no python at $PY; run 'make install' or set MDLOADER_VENV"
    [[ -f $CONFIG ]] || mdl_die "config $CONFIG not found; set MDLOADER_CONFIG"
}

# `module load` each named module (a site's Lmod/Environment Modules); "" loads nothing.
mdl_modules() {
    local mods=$1
    [[ -z $mods ]] && return 0
    if mdl_dry; then
        echo "+ module load $mods"
        return 0
    fi
    type module >/dev/null 2>&1 || mdl_die "no 'module' command here; set MDLOADER_MODULES=''"
    # shellcheck disable=SC2086  # a space-separated list of module names
    module load $mods
}

# Find a NCCL/RCCL network plugin (lib<name>*.so, which NCCL/RCCL load from the library path):
# MDLOADER_CCL_PLUGIN_DIR is put first on LD_LIBRARY_PATH, then LD_LIBRARY_PATH is searched.
# Returns 1 with a warning when there is none: NCCL/RCCL then run over TCP sockets (correct,
# much slower across nodes).
mdl_ccl_plugin() {
    local name=$1 dir found=""
    if [[ -n ${MDLOADER_CCL_PLUGIN_DIR:-} ]]; then
        mdl_export LD_LIBRARY_PATH="$MDLOADER_CCL_PLUGIN_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    local -a dirs
    IFS=: read -r -a dirs <<< "${LD_LIBRARY_PATH:-}"
    for dir in "${dirs[@]}"; do
        if [[ -n $dir ]] && compgen -G "$dir/$name*.so*" >/dev/null; then
            found=$dir
            break
        fi
    done
    if [[ -z $found ]]; then
        mdl_note "warning: no $name*.so (the NCCL/RCCL Slingshot plugin) on LD_LIBRARY_PATH;" \
            "the gradient allreduce will use TCP sockets. Set MDLOADER_CCL_PLUGIN_DIR to its lib/"
        return 1
    fi
    mdl_note "NCCL/RCCL network plugin: $found/$name*.so"
    return 0
}

# Calibrate once: measure this machine's network into PROFILE_CACHE unless it already exists.
# Later jobs reuse the file (the estimator only needs it once per machine and MPI version).
# A non-empty file is a whole one: calibrate writes a temporary file beside it and renames it
# into place, so a job starting while another calibrates sees no profile or a complete one.
mdl_calibrate_once() {
    local profile=$1
    shift
    if [[ -s $profile ]]; then
        mdl_note "machine profile cached at $profile (delete it to recalibrate)"
        return 0
    fi
    mdl_dry || mkdir -p "$(dirname "$profile")"
    mdl_run "$@" "$PY" -m mpi4py -m mdloader_plugin calibrate --out "$profile"
}

# Framework-specific training arguments into the array MDL_ARGS (after `mdloader train`):
#   hydragnn: --config C --set loader=L [--set mdloader.profile=P] [--set run_name=R] [--set ...]
#   fairchem: --config C loader=L [loader.profile=P] [job.run_name=R] [...]   (Hydra overrides)
# MDLOADER_SET items are passed in the framework's own override syntax.
mdl_framework_args() {
    local framework=$1 loader=$2 profile=$3 run=$4 kv
    local overrides=("loader=$loader")
    case $framework in
        hydragnn)
            [[ -n $profile && $loader == mdloader ]] && overrides+=("mdloader.profile=$profile")
            [[ -n $run ]] && overrides+=("run_name=$run") ;;
        fairchem)
            [[ -n $profile && $loader == mdloader ]] && overrides+=("loader.profile=$profile")
            [[ -n $run ]] && overrides+=("job.run_name=$run") ;;
        *) mdl_die "unknown framework '$framework' (hydragnn or fairchem)" ;;
    esac
    for kv in ${MDLOADER_SET:-}; do
        [[ $kv == *=* ]] || mdl_die "MDLOADER_SET item '$kv' is not KEY=VALUE"
        overrides+=("$kv")
    done
    MDL_ARGS=("$framework" --config "$CONFIG")
    for kv in "${overrides[@]}"; do
        if [[ $framework == hydragnn ]]; then
            MDL_ARGS+=(--set "$kv")
        else
            MDL_ARGS+=("$kv")
        fi
    done
}

# The trainer log a run writes its MDLOADER-EPOCH lines to (relative to the working folder).
mdl_log_path() {
    local framework=$1 run=$2
    case $framework in
        hydragnn) echo "logs/$run/run.log" ;;
        fairchem) echo "${MDLOADER_FAIRCHEM_RUN_DIR:-runs/fairchem}/$run/logs/train.log" ;;
    esac
}

# mdl_train FRAMEWORK LOADER PROFILE RUN -- LAUNCHER...
# Runs `LAUNCHER python -m mpi4py -m mdloader_plugin train FRAMEWORK ...` (see above).
mdl_train() {
    local framework=$1 loader=$2 profile=$3 run=$4
    shift 4
    [[ ${1:-} == -- ]] && shift
    mdl_framework_args "$framework" "$loader" "$profile" "$run"
    mdl_run "$@" "$PY" -m mpi4py -m mdloader_plugin train "${MDL_ARGS[@]}"
}

# Stop with one line naming the documented step when the recipe's own config would read a data
# file (or folder) that is not there: PATH relative to MDLOADER_DATA_DIR. Another config
# (MDLOADER_CONFIG) names its own files, which the trainer checks.
mdl_need_data() {
    local path=$MDLOADER_DATA_DIR/$1 default_config=$2
    [[ -n ${MDLOADER_CONFIG:-} ]] && return 0
    mdl_dry && return 0
    [[ -e $path ]] || mdl_die "no data file $path (what $default_config reads); make it" \
        "first: docs/first-job.md, step 2 (mdloader convert), or set MDLOADER_DATA_DIR or" \
        "MDLOADER_CONFIG"
}

# mdl_site_main FRAMEWORK BASELINE DEFAULT_CONFIG DATA BASELINE_DATA: the body of a site recipe
# (needs a site file sourced first: GPUS_PER_NODE, SITE_MODULES, SITE_PROFILE, site_env,
# site_launcher). MDLOADER_LOADER picks `mdloader` (default) or BASELINE; mdloader runs
# calibrate-once first. DATA / BASELINE_DATA: what DEFAULT_CONFIG reads with each loader, under
# MDLOADER_DATA_DIR (checked before anything runs).
mdl_site_main() {
    local framework=$1 baseline=$2 default_config=$3 data=$4 baseline_data=$5
    local loader=${MDLOADER_LOADER:-mdloader}
    local profile_cache=${MDLOADER_PROFILE_CACHE:-$SITE_PROFILE}
    local nodes=${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-${MDLOADER_NODES:-1}}}
    [[ $loader == mdloader || $loader == "$baseline" ]] \
        || mdl_die "MDLOADER_LOADER=$loader: choose mdloader or $baseline"
    local workdir=${MDLOADER_WORKDIR:-$SITE_SCRATCH/runs}
    mdl_setup "$default_config"
    mdl_modules "${MDLOADER_MODULES-$SITE_MODULES}"
    site_env
    # Data on scratch (the configs read $MDLOADER_DATA_DIR); this checkout's package first;
    # logs/ and runs/ in the scratch work folder, never in the checkout.
    mdl_export MDLOADER_DATA_DIR="${MDLOADER_DATA_DIR:-$SITE_SCRATCH/data}" \
        PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
    if [[ $loader == mdloader ]]; then
        mdl_need_data "$data" "$default_config"
    else
        mdl_need_data "$baseline_data" "$default_config"
    fi
    mdl_run mkdir -p "$workdir"
    if mdl_dry; then
        echo "+ cd $(printf '%q' "$workdir")"
    else
        cd "$workdir" || mdl_die "cannot enter $workdir; set MDLOADER_WORKDIR"
    fi
    local profile=""
    if [[ $loader == mdloader && $nodes -lt 2 && ! -s $profile_cache ]]; then
        # A one-node job measures no inter-node figures: its profile, cached, would copy the
        # intra-node ones into them for every later job on many nodes. Use the shipped site
        # profile and leave the calibration to the first job on two or more nodes.
        mdl_note "one node: not calibrating (a one-node profile has no inter-node figures);" \
            "using the shipped $SITE profile; the first job on 2 or more nodes calibrates" \
            "into $profile_cache"
        profile=$SITE
        mdl_export MDLOADER_PROFILE="$profile"
    elif [[ $loader == mdloader ]]; then
        # Calibrate once, on two nodes (intra- and inter-node figures; the cost model
        # extrapolates to more nodes). Later jobs find the file and skip this step.
        site_launcher 2
        mdl_calibrate_once "$profile_cache" "${LAUNCH[@]}"
        profile=$profile_cache
        mdl_export MDLOADER_PROFILE="$profile"
    fi
    site_launcher "$nodes"
    mdl_note "$SITE: $nodes nodes x $GPUS_PER_NODE GPUs = $((nodes * GPUS_PER_NODE)) ranks," \
        "loader $loader"
    local run=${MDLOADER_RUN_NAME:-$framework-$SITE-${SLURM_JOB_ID:-dry}}-$loader
    mdl_train "$framework" "$loader" "$profile" "$run" -- "${LAUNCH[@]}"
    mdl_note "epoch lines of run $run are in $workdir/$(mdl_log_path "$framework" "$run");" \
        "compare runs with: mdloader compare-logs BASELINE_LOG MDLOADER_LOG --plot epochs.png"
}

# mdl_local_main FRAMEWORK BASELINE DEFAULT_CONFIG: the body of a one-node recipe. Trains with
# each loader in MDLOADER_LOADERS (default: mdloader, then BASELINE) on all the job's tasks, one
# run each (run name <MDLOADER_RUN_NAME>-<loader>), then prints `mdloader compare-logs` on their
# logs. A failed run does not stop the next one; the job fails if any run failed.
#   MDLOADER_LAUNCHER  mpiexec (the venv's, default) | srun (srun --mpi=pmi2: an MPI with
#                      Slurm PMI support, e.g. the mpich wheel; the Open MPI wheel has none)
#   MDLOADER_WORKDIR   folder the runs start in, where logs/ is written  [the checkout]
#   MDLOADER_TIMEOUT   seconds a run may take before it is killed  [1800]
mdl_local_main() {
    local framework=$1 baseline=$2 default_config=$3
    local loaders=${MDLOADER_LOADERS:-"mdloader $baseline"} ntasks=${SLURM_NTASKS:-4}
    local base=${MDLOADER_RUN_NAME:-$framework-${SLURM_JOB_ID:-local}} loader run failed=0
    local logs=()
    mdl_setup "$default_config"
    # The Open MPI wheel as root and with more ranks than cores (harmless for other MPIs).
    mdl_export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe OMPI_MCA_osc=^ucx \
        OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
    case ${MDLOADER_LAUNCHER:-mpiexec} in
        mpiexec) LAUNCH=("$VENV/bin/mpiexec" -n "$ntasks") ;;
        srun) LAUNCH=(srun --mpi=pmi2 --kill-on-bad-exit=1 -n "$ntasks") ;;
        *) mdl_die "MDLOADER_LAUNCHER=$MDLOADER_LAUNCHER: choose mpiexec or srun" ;;
    esac
    LAUNCH=(timeout "${MDLOADER_TIMEOUT:-1800}" "${LAUNCH[@]}")
    cd "${MDLOADER_WORKDIR:-$ROOT}" || mdl_die "cannot enter ${MDLOADER_WORKDIR:-$ROOT}"
    for loader in $loaders; do
        [[ $loader == mdloader || $loader == "$baseline" ]] \
            || mdl_die "MDLOADER_LOADERS item '$loader': choose mdloader or $baseline"
        run=$base-$loader
        mdl_note "run $run: $framework with loader $loader on $ntasks ranks"
        if mdl_train "$framework" "$loader" "${MDLOADER_PROFILE_CACHE:-}" "$run" -- "${LAUNCH[@]}"
        then  # the baseline's log first: compare-logs gives speed-ups against the first
            if [[ $loader == "$baseline" ]]; then
                logs=("$(mdl_log_path "$framework" "$run")" "${logs[@]}")
            else
                logs+=("$(mdl_log_path "$framework" "$run")")
            fi
        else
            mdl_note "run $run failed (exit $?)"
            failed=1
        fi
    done
    if ((${#logs[@]} > 0)); then
        mdl_run "$PY" -m mdloader_plugin compare-logs "${logs[@]}" || failed=1
    fi
    return "$failed"
}
