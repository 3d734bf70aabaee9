#!/usr/bin/env bash
# Model-parallel scaling on the CPU: a wide autoencoder (ITEMS -> HIDDEN -> ITEMS, sigmoid, SMCE,
# as the wide-10m workload of design/performance.md, scaled to this machine's memory) trained
# for one epoch with 1, 2 and 3 ranks. Per run: seconds per epoch (the tool's own epoch time)
# and each rank's peak resident memory (/usr/bin/time %M). Writes
# benchmarks/results/<date>-<machine>-wide-scaling.json and prints a table.
#
#   benchmarks/parallel/scaling.sh [build-dir]   (env: ITEMS, USERS, NNZ, HIDDEN, BATCH, RANKS)
set -euo pipefail
build=${1:-build}
cli=$(realpath "$build/sparsenet")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ITEMS=${ITEMS:-1000000}
USERS=${USERS:-2000}
NNZ=${NNZ:-100000}
HIDDEN=${HIDDEN:-256}
BATCH=${BATCH:-256}
RANKS=${RANKS:-"1 2 3"}
CORES=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$cli" generate -o "$work/data.nc" --users "$USERS" --items "$ITEMS" --nnz "$NNZ" --seed 5 -q
cat > "$work/net.json" <<JSON
{ "Version": 0.9, "Name": "wide", "Kind": "AutoEncoder",
  "ScaledMarginalCrossEntropy": {"oneTarget": 0.9, "zeroTarget": 0.1, "oneScale": 1, "zeroScale": 1},
  "ErrorFunction": "ScaledMarginalCrossEntropy",
  "Layers": [
    {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "gl_input", "Sparse": true},
    {"Name": "Hidden", "Kind": "Hidden", "N": $HIDDEN, "Activation": "Sigmoid"},
    {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "gl_output", "Activation": "Sigmoid"}
  ]}
JSON

mpi="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader"
rows=()
for p in $RANKS; do
  # The machine's cores shared out: each rank gets CORES / P threads (at least 1).
  threads=$(( CORES / p )); [ "$threads" -ge 1 ] || threads=1
  log="$work/run$p.log"
  rm -f "$work"/peak.*
  $mpi -x OMP_NUM_THREADS=$threads -np "$p" sh -c '/usr/bin/time -f %M -o "$0/peak.$OMPI_COMM_WORLD_RANK" "$@"' \
    "$work" "$cli" train -c "$work/net.json" -i "$work/data.nc" -n "$work/model$p.nc" \
    -b "$BATCH" -e 1 --threads "$threads" --metrics-out "$work/m$p.jsonl" > "$log" 2>&1
  seconds=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['seconds'])" "$work/m$p.jsonl")
  loss=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['loss'])" "$work/m$p.jsonl")
  peaks=$(for r in $(seq 0 $((p - 1))); do cat "$work/peak.$r"; done | tr '\n' ' ')
  rows+=("$p $threads $seconds $loss $peaks")
  echo "ranks $p x $threads threads: ${seconds}s per epoch, loss $loss, peak kB per rank: $peaks"
done

date=$(date +%Y-%m-%d)
out="$root/benchmarks/results/$date-vm-wide-scaling.json"
python3 - "$out" "$ITEMS" "$USERS" "$NNZ" "$HIDDEN" "$BATCH" "$CORES" "${rows[@]}" <<'PY'
import json, sys
out, items, users, nnz, hidden, batch, cores = sys.argv[1:8]
runs = []
for row in sys.argv[8:]:
    f = row.split()
    runs.append({"ranks": int(f[0]), "threads_per_rank": int(f[1]), "seconds_per_epoch": float(f[2]),
                 "loss": float(f[3]), "peak_rss_mb_per_rank": [int(k) / 1024 for k in f[4:]]})
base = runs[0]
print("| ranks | threads/rank | s/epoch | speed-up | loss | peak RSS per rank (MB) | vs 1 rank |")
print("|---|---|---|---|---|---|---|")
for r in runs:
    peak = max(r["peak_rss_mb_per_rank"])
    print(f"| {r['ranks']} | {r['threads_per_rank']} | {r['seconds_per_epoch']:.2f} | "
          f"{base['seconds_per_epoch'] / r['seconds_per_epoch']:.2f}x | {r['loss']:.6f} | "
          f"{', '.join(f'{m:.0f}' for m in r['peak_rss_mb_per_rank'])} | "
          f"{peak / max(base['peak_rss_mb_per_rank']):.2f} |")
json.dump({"workload": "wide autoencoder", "items": int(items), "users": int(users), "nnz": int(nnz),
           "hidden": int(hidden), "batch": int(batch), "cores": int(cores), "runs": runs},
          open(out, "w"), indent=1)
print("wrote", out)
PY
