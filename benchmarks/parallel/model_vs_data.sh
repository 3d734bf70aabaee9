#!/usr/bin/env bash
# Model vs data parallelism on the CPU, the comparison of the distributed-training benchmarks:
# a narrow network (few items, big batches: the gradients are small, the activations are not)
# and a wide one (many items: the gradients are huge, the activations small), each trained for
# EPOCHS epochs on 1 rank and on RANKS ranks with --parallel model and --parallel data. Per run:
# seconds per epoch (the tool's own epoch time), the last epoch's loss, each rank's peak resident
# memory (/usr/bin/time %M) and the bytes each rank sends per step (from --dry-run). Writes
# benchmarks/results/<date>-vm-model-vs-data.json and prints a table.
#
#   benchmarks/parallel/model_vs_data.sh [build-dir]
#   env: NARROW="items users nnz hidden batch", WIDE="items users nnz hidden batch", RANKS, EPOCHS
set -euo pipefail
build=${1:-build}
cli=$(realpath "$build/sparsenet")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
NARROW=${NARROW:-"2000 100000 2000000 256 4096"}
WIDE=${WIDE:-"200000 4000 200000 256 256"}
RANKS=${RANKS:-2}
EPOCHS=${EPOCHS:-2}
CORES=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpi="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader"
export OMPI_MCA_mpi_yield_when_idle=1

rows=()
for shape in narrow wide; do
  if [ "$shape" = narrow ]; then read -r items users nnz hidden batch <<<"$NARROW"
  else read -r items users nnz hidden batch <<<"$WIDE"; fi
  "$cli" generate -o "$work/$shape.nc" --users "$users" --items "$items" --nnz "$nnz" --seed 5 -q
  cat > "$work/$shape.json" <<JSON
{ "Version": 0.9, "Name": "$shape", "Kind": "AutoEncoder",
  "ErrorFunction": "ScaledMarginalCrossEntropy",
  "Layers": [
    {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "gl_input", "Sparse": true},
    {"Name": "Hidden", "Kind": "Hidden", "N": $hidden, "Activation": "Sigmoid"},
    {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "gl_output", "Activation": "Sigmoid"}
  ]}
JSON
  # "traffic per rank per step: model parallel X MB; data parallel would all-reduce ...: Y MB"
  traffic=$("$cli" train -c "$work/$shape.json" -i "$work/$shape.nc" -n "$work/x.nc" -b "$batch" \
    --optimizer sgd --dry-run --ranks "$RANKS" | grep "traffic per rank per step")
  read -r model_mb data_mb auto < <(python3 -c "
import re, sys
t, unit = sys.argv[1], {'B': 1e-6, 'kB': 1e-3, 'MB': 1.0, 'GB': 1e3}
m = re.search(r'model parallel ([0-9.]+) (\w+);', t)
d = re.search(r'gradient: ([0-9.]+) (\w+)', t)
print(float(m[1]) * unit[m[2]], float(d[1]) * unit[d[2]], re.search(r'auto: (\w+)', t)[1])" "$traffic")
  for mode in single model data; do
    if [ "$mode" = single ]; then p=1; else p=$RANKS; fi
    threads=$(( CORES / p )); [ "$threads" -ge 1 ] || threads=1
    parallel=$([ "$mode" = single ] && echo auto || echo "$mode")
    rm -f "$work"/peak.*
    $mpi -x OMP_NUM_THREADS=$threads -np "$p" sh -c \
      '/usr/bin/time -f %M -o "$0/peak.$OMPI_COMM_WORLD_RANK" "$@"' "$work" \
      "$cli" train -c "$work/$shape.json" -i "$work/$shape.nc" -n "$work/m.nc" -b "$batch" \
      -e "$EPOCHS" --optimizer sgd --threads "$threads" --parallel "$parallel" \
      --metrics-out "$work/m.jsonl" > "$work/log" 2>&1 || { cat "$work/log"; exit 1; }
    read -r seconds loss < <(python3 -c "
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
print(sum(l['seconds'] for l in lines[1:]) / max(1, len(lines) - 1) if len(lines) > 1 else lines[0]['seconds'], lines[-1]['loss'])" "$work/m.jsonl")
    peaks=$(for r in $(seq 0 $((p - 1))); do cat "$work/peak.$r"; done | tr '\n' ' ')
    rows+=("$shape $items $hidden $batch $mode $p $threads $seconds $loss $model_mb $data_mb $auto $peaks")
    echo "$shape ($items items, hidden $hidden, batch $batch) $mode x$p: ${seconds}s/epoch, loss $loss, peak kB: $peaks"
  done
done

date=$(date +%Y-%m-%d)
out="$root/benchmarks/results/$date-vm-model-vs-data.json"
python3 - "$out" "$CORES" "$EPOCHS" "${rows[@]}" <<'PY'
import json, sys
out, cores, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
runs = []
for row in sys.argv[4:]:
    f = row.split()
    runs.append({"network": f[0], "items": int(f[1]), "hidden": int(f[2]), "batch": int(f[3]),
                 "mode": f[4], "ranks": int(f[5]), "threads_per_rank": int(f[6]),
                 "seconds_per_epoch": float(f[7]), "loss": float(f[8]),
                 "model_mb_per_step": float(f[9]), "data_mb_per_step": float(f[10]),
                 "auto_picks": f[11], "peak_rss_mb_per_rank": [int(k) / 1024 for k in f[12:]]})
print("| network | mode | ranks x threads | s/epoch | vs 1 rank | loss | MB sent per rank per step | peak RSS per rank (MB) |")
print("|---|---|---|---|---|---|---|---|")
for r in runs:
    base = next(b for b in runs if b["network"] == r["network"] and b["mode"] == "single")
    sent = "-" if r["mode"] == "single" else f"{r['model_mb_per_step' if r['mode'] == 'model' else 'data_mb_per_step']:.2f}"
    name = f"{r['network']} ({r['items']} items, hidden {r['hidden']}, batch {r['batch']}; auto: {r['auto_picks']})"
    print(f"| {name} | {r['mode']} | {r['ranks']} x {r['threads_per_rank']} | {r['seconds_per_epoch']:.2f} | "
          f"{base['seconds_per_epoch'] / r['seconds_per_epoch']:.2f}x | {r['loss']:.3f} | {sent} | "
          f"{', '.join(f'{m:.0f}' for m in r['peak_rss_mb_per_rank'])} |")
json.dump({"cores": cores, "epochs": epochs, "optimizer": "sgd", "runs": runs}, open(out, "w"), indent=1)
print("wrote", out)
PY
