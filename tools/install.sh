#!/usr/bin/env bash
# Install MDLoader and everything its tests, demo and benchmarks need into .venv.
# Order matters: torch 2.13.0 (the CPU wheel) first, so nothing later pulls a CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/pip --disable-pip-version-check -q"
$PIP install --upgrade pip==26.3
echo "[install] torch 2.13.0 (CPU wheel)"
$PIP install torch==2.13.0
echo "[install] MDLoader with MPI wheel, converters, HydraGNN and fairchem needs, test and docs tools (pinned)"
$PIP install -c requirements/lock.txt -e ".[wheels-mpi,convert,hydragnn,fairchem,test,docs]"
# The compiled batch kernels (mdloader_plugin/records/_kernels.c) and the read deadline's native
# thread (mdloader_plugin/core/_deadline.c; setup.py, both optional): built in
# place so the editable install finds them; without a C compiler MDLoader builds batches with numpy.
"$VENV/bin/python" setup.py -q build_ext --inplace >/dev/null 2>&1 && echo "[install] compiled batch kernels built" ||
  echo "[install] warning: compiled batch kernels not built (no C compiler?): batches are built with numpy"
# hydragnn 3.0 (the only PyPI release) declares pickle5 (does not build on Python 3.11, never
# imported) and torch-scatter (source build, not needed by the models we train): install its code
# without those declared dependencies; its real needs come from the 'hydragnn' extra above.
echo "[install] hydragnn 3.0 (--no-deps; see docs/hydragnn.md)"
$PIP install --no-deps hydragnn==3.0
# HydraGNN 5.0 (GitHub release v5.0, what HPC users run), HydraGNN main (d251f81, 2026-08-21:
# len(loader), set_epoch on batch_sampler, cost-aware Batching) and main with the named data
# schema (88063418: top-level Variables, datasets without var_config) beside 3.0: each source tree lives
# in $VENV/src/hydragnn-<version> and is used by putting that folder first on PYTHONPATH
# (upstream's own route; `pip install --no-deps <tree>` would miss hydragnn.utils). Both import
# torch_scatter (a source build, ~7 min on 2 cores, pip caches the wheel) and vesin. The sources
# come from the shared vendor copies next to the checkout; without one, that version is skipped
# (docs/hydragnn-5.md).
H5_TAR=${HYDRAGNN5_TAR:-../shared/vendor/HydraGNN-5.0.tar.gz}
HM_TAR=${HYDRAGNN_MAIN_TAR:-../shared/vendor/HydraGNN-main-d251f81.tar.gz}
HN_TAR=${HYDRAGNN_MAIN527_TAR:-../shared/vendor/HydraGNN-main-88063418.tar.gz}
upstream=0
for pair in "5.0:$H5_TAR" "main:$HM_TAR" "main527:$HN_TAR"; do
  ver=${pair%%:*} tar=${pair#*:} src="$VENV/src/hydragnn-${pair%%:*}"
  if [ -f "$tar" ]; then
    upstream=1
    if [ ! -f "$src/hydragnn/__init__.py" ]; then
      echo "[install] HydraGNN $ver source -> $src"
      mkdir -p "$src"
      tar xzf "$tar" -C "$src" --strip-components=1
    fi
  else
    echo "[install] no $tar: HydraGNN $ver not installed (its tests are skipped)"
  fi
done
if [ "$upstream" = 1 ]; then
  echo "[install] torch-scatter and vesin for HydraGNN 5.0/main (pinned; torch-scatter builds once)"
  MAX_JOBS=${MAX_JOBS:-2} $PIP install --no-build-isolation \
    "torch-scatter==$(grep -i '^torch-scatter==' requirements/lock.txt | cut -d= -f3)"
  $PIP install "vesin==$(grep -i '^vesin==' requirements/lock.txt | cut -d= -f3)"
fi
# The MPICH family (Cray MPICH's on Perlmutter and Frontier) beside the Open MPI wheel: the PyPI
# mpich wheel in its own prefix, $VENV/mpich/{bin/mpiexec,lib/libmpi.so.12}; mpi4py loads it when
# MPI4PY_LIBMPI points there (tests/common/mpirun.py, tests/integration/test_mpich.py).
if [ ! -e "$VENV/mpich/lib/libmpi.so.12" ]; then
  echo "[install] mpich wheel into $VENV/mpich (the tests' second MPI family)"
  $PIP install --no-deps --prefix "$VENV/mpich" \
    "mpich==$(grep -i '^mpich==' requirements/lock.txt | cut -d= -f3)"
fi
# Open MPI wheel settings: oversubscribe 2 cores without flags; no UCX on this machine.
etc="$VENV/etc"
if [ -d "$etc" ]; then
  grep -q '^rmaps_default_mapping_policy' "$etc/prte-mca-params.conf" 2>/dev/null ||
    echo 'rmaps_default_mapping_policy = :oversubscribe' >> "$etc/prte-mca-params.conf"
  grep -q '^osc = ' "$etc/openmpi-mca-params.conf" 2>/dev/null ||
    echo 'osc = ^ucx' >> "$etc/openmpi-mca-params.conf"
fi
# As root (containers, CI) Open MPI's mpiexec refuses to start without these two variables.
act="$VENV/bin/activate"
# (older installs also switched on Open MPI's TCP progress thread here: it stalls MDLoader's
# one-sided Gets across nodes for seconds, see backends/onesided.py)
sed -i '/OMPI_MCA_btl_tcp_progress_thread/d' "$act"
grep -q OMPI_ALLOW_RUN_AS_ROOT "$act" || cat >> "$act" <<'EOS'
# MDLoader: let Open MPI's mpiexec run as root (containers/CI) and oversubscribe small machines.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe OMPI_MCA_osc=^ucx
EOS
date > "$VENV/.installed"
echo "[install] done: $VENV"
