#!/usr/bin/env bash
# make bench: loaders side by side, HydraGNN training, scale on paper, estimator accuracy, then
# bench/RESULTS.md. Reduced grid by default (a few minutes on 2 cores); BENCH_FULL=1 runs the
# full grid (ranks 2,4,8 x batch 4,32,256 x both data sets; 4-rank training; full estimator grid;
# GPU-rate consumer with 150 steps x 3 rounds). The real DDStore baselines are built first
# (tools/build_ddstore.sh: cc80335 into the venv, 954ef59 into build/ddstore-954ef59; bench-only).
# BENCH_CLUSTER=1 adds the store-based loaders across 2 emulated hosts (root; 2x2@1gbit by default,
# BENCH_CLUSTER_SHAPE=HxR@RATE to change). Note: the estimator step rewrites
# bench/results/estimator_accuracy.json (quick grid unless BENCH_FULL=1).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_osc=^ucx
export PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export PATH="$PWD/.venv/bin:$PATH"
full=()
quick=(--quick)
if [[ "${BENCH_FULL:-0}" == 1 ]]; then full=(--full); quick=(); fi
start=$(date +%s)
echo "== the real DDStore (bench-only baseline; skipped if already built)"
tools/build_ddstore.sh || echo "bench: real DDStore not built: its rows are skipped"
echo "== loaders side by side"
"$PY" -m bench.loaders.compare "${full[@]}"
if [[ "${BENCH_CLUSTER:-0}" == 1 ]]; then  # needs root (network namespaces)
  echo "== store-based loaders across 2 emulated hosts"
  "$PY" -m bench.loaders.compare --cluster "${BENCH_CLUSTER_SHAPE:-2x2@1gbit}" --steps 16 --repeats 3
fi
echo "== DDStore 954ef59's batched reads (get_batch, methods 0 and 1, padded and row layouts), fetch only"
if tools/build_ddstore.sh 954ef59; then
  if [[ "${BENCH_FULL:-0}" == 1 ]]; then "$PY" -m bench.ddstore.batched --rounds 7 --steps 8
  else "$PY" -m bench.ddstore.batched --ranks 2 --heldout-ranks "" --rounds 3 --steps 4; fi
  if [[ "${BENCH_CLUSTER:-0}" == 1 ]]; then  # 2 emulated hosts (root)
    "$PY" -m bench.ddstore.batched --cluster 2x2@1gbit --merge
  fi
else
  echo "bench: DDStore 954ef59 not built: bench/results/ddstore_batched.json keeps the last run"
fi
echo "== GPU-rate consumer (trainer stand-in at 2-20 ms steps)"
if [[ "${BENCH_FULL:-0}" == 1 ]]; then "$PY" -m bench.gpu.rate --steps 150 --repeats 3
else "$PY" -m bench.gpu.rate --steps 40 --repeats 1; fi
echo "== GIL-free producer: CPU a step (GIL-held/free), data-wait at 1-2 ms, kernels vs numpy"
"$PY" -m bench.gil.targets --no-report
if "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "== HydraGNN demo on this node's GPU (host batches, device: auto pinned and not; 1 and 2 ranks)"
  OUT=run/gpu-demo bash tools/gpu_demo.sh && "$PY" -m bench.gpu.demo run/gpu-demo/epochs.log \
    --machine "$(hostname), $("$PY" -c "import torch; print(torch.cuda.get_device_name(0))")" \
    --date "$(date -u +%F)"
else
  echo "== HydraGNN demo on a GPU: skipped (no CUDA device; bench/results/gpu_demo.json keeps the last)"
fi
echo "== HydraGNN training"
"$PY" -m bench.loaders.training "${full[@]}"
echo "== scale on paper (model output)"
"$PY" -m bench.estimator.scale_model
echo "== replica groups on paper: auto's (backend, W) on Perlmutter/Frontier at 64-2048 ranks (model output)"
"$PY" -m bench.groups.model
echo "== data-set scale: index + order per rank, epoch start, load (${BENCH_SCALE_SAMPLES:-20000000} tiny records, 4 ranks)"
"$PY" -m bench.scale.dataset --samples "${BENCH_SCALE_SAMPLES:-20000000}"
echo "== data-set scale: per-step cost of the index kinds and orders (one process)"
"$PY" -m bench.scale.step
echo "== per-rank cost against the number of ranks (mdloader rank-cost, one process; 2-8 rank A/B)"
"$PY" -m bench.estimator.rank_cost
"$PY" -m bench.estimator.rank_cost --small-only
echo "== fairchem: max_atoms batches against fairchem's sampler, the 4-data-set mix's state"
"$PY" -m bench.fairchem.batches
echo "== conversion rate against ranks (mdloader convert, 512 OC20-like structures in 16 shards; 1, 2, 4 ranks)"
"$PY" -m bench.convert.rate
echo "== load peak: memory while a store loads, over records + index (1 and 4 ranks)"
"$PY" -m bench.store.load_peak
echo "== estimator accuracy"
"$PY" -m bench.estimator.accuracy "${quick[@]}"
# --- estimator on the emulated multi-node cluster (issue 10; needs root, ~3-5 min; opt-in) ---
if [[ "${BENCH_CLUSTER:-0}" == 1 ]]; then
  echo "== estimator accuracy on the emulated cluster (2 hosts, 200mbit and unlimited links)"
  "$PY" -m bench.estimator.cluster
fi
if [[ "${BENCH_CLUSTER:-0}" == 1 ]]; then
  echo "== backend choice on varied emulated clusters (issue 15; reduced slice unless BENCH_FULL=1)"
  "$PY" -m bench.estimator.backend_choice "${full[@]}"
fi
# --- replica groups on the emulated cluster (issue 16; needs root; opt-in) ---
if [[ "${BENCH_CLUSTER:-0}" == 1 ]]; then
  echo "== replica groups: every W x backend and auto across emulated hosts"
  if [[ "${BENCH_FULL:-0}" == 1 ]]; then
    "$PY" -m bench.groups.cluster --rates 200mbit,1gbit --shapes 2x2,4x1 --kinds hydragnn,oc20 \
        --batches 4,32,256
  else
    "$PY" -m bench.groups.cluster  # reduced slice: 2x2 at 200mbit, OC20-like, batch 32
  fi
fi
# --- end of the emulated-cluster block ---
"$PY" -m bench.report
"$PY" tools/docs_figures.py   # the figures README.md and docs/ quote, from the new JSON
echo "bench done in $(( $(date +%s) - start )) s: bench/RESULTS.md, bench/*.png, bench/results/*.json"
