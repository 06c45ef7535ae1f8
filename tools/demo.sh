#!/usr/bin/env bash
# `make demo`: train the HydraGNN demo (a small GIN, 3 epochs) on 4 MPI ranks twice — once with
# `loader: mdloader`, once with `loader: hydragnn` (HydraGNN's own DataLoader over per-sample
# ADIOS2 reads) — then print their epoch times side by side with `mdloader compare-logs`.
# Same seed, same batches: the two runs print the same losses; only the data path differs.
# Environment: NP (ranks, default 4), GRAPHS (default 2000), DATA (default data/demo.bp).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${VENV:-.venv}/bin
NP=${NP:-4}
GRAPHS=${GRAPHS:-2000}
DATA=${DATA:-data/demo.bp}
CONFIG=recipes/hydragnn/demo.yaml
source tools/mpi_env.sh

if [ ! -e "$DATA" ]; then
  echo "[demo] making $DATA ($GRAPHS synthetic molecules, split 0.8/0.1/0.1)"
  mkdir -p "$(dirname "$DATA")"
  "$BIN/mdloader" synth --kind hydragnn --num-graphs "$GRAPHS" --split 0.8,0.1,0.1 \
    --out "$DATA" --quiet
fi

mkdir -p run
logs=()
for loader in hydragnn mdloader; do
  run="gin-demo-$loader"
  rm -rf "logs/$run"
  echo "[demo] mpiexec -n $NP mdloader train hydragnn --config $CONFIG --set loader=$loader"
  set +e
  timeout 1200 "$BIN/mpiexec" -n "$NP" "$BIN/python" -m mpi4py -m mdloader_plugin \
    train hydragnn --config "$CONFIG" --set "loader=$loader" --set "run_name=$run" \
    --set "Dataset.path=$DATA" 2>&1 | tee "run/$run.out" |
    grep -E "MDLOADER-EPOCH|Epoch: |error|backend="
  status=${PIPESTATUS[0]}
  set -e
  if [ "$status" -ne 0 ]; then
    echo "[demo] the $loader run failed (exit $status); full output in run/$run.out" >&2
    exit 1
  fi
  logs+=("logs/$run/run.log")
done

echo
echo "[demo] epoch times (HydraGNN's own loader first; speed-up is against it):"
"$BIN/mdloader" compare-logs "${logs[@]}"
