#!/usr/bin/env bash
# The memory plan (sparsenet train --dry-run) against the measured peak resident memory of the
# same run on the CPU, for wide autoencoders (ITEMS -> HIDDEN -> ITEMS, one epoch). Per case:
# the plan's total, the peak RSS (/usr/bin/time -v), their ratio, seconds per step. Writes
# benchmarks/results/<date>-vm-wide-memory-plan.json and prints a table.
#
#   benchmarks/wide/plan_vs_peak.sh [build-dir]
#   (env: ITEMS, USERS, NNZ, CASES="hidden:batch:optimizer:sparse-updates ...", THREADS)
set -euo pipefail
build=${1:-build}
cli=$(realpath "$build/sparsenet")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ITEMS=${ITEMS:-1000000}
USERS=${USERS:-512}
NNZ=${NNZ:-10240}
THREADS=${THREADS:-2}
CASES=${CASES:-"32:64:momentum:exact 32:128:adam:lazy 256:256:sgd:exact"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$cli" generate -o "$work/data.nc" --users "$USERS" --items "$ITEMS" --nnz "$NNZ" --seed 5 -q
rows=()
for c in $CASES; do
  IFS=: read -r hidden batch opt updates <<< "$c"
  cat > "$work/net.json" <<JSON
{ "Version": 0.9, "Name": "wide", "Kind": "AutoEncoder", "ErrorFunction": "CrossEntropy",
  "Layers": [
    {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "gl_input", "Sparse": true},
    {"Name": "Hidden", "Kind": "Hidden", "N": $hidden, "Activation": "Tanh"},
    {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "gl_output", "Activation": "Sigmoid", "Sparse": true}
  ]}
JSON
  args=(-c "$work/net.json" -i "$work/data.nc" -n "$work/model.nc" -b "$batch" -e 1
        --optimizer "$opt" --sparse-updates "$updates" --device cpu --threads "$THREADS")
  # "total: 923.2 MB of host memory" or "total: 1.56 GB ...": in GB
  plan=$("$cli" train "${args[@]}" --dry-run |
         awk '/^  total: [0-9.]+ [kMG]B of host memory/ {
                u = $3; v = $2; print (u == "GB" ? v : u == "MB" ? v / 1e3 : v / 1e6); exit }')
  [[ -n "$plan" ]] || { echo "plan_vs_peak.sh: no plan total in train --dry-run's output" >&2; exit 1; }
  /usr/bin/time -v "$cli" train "${args[@]}" --metrics-out "$work/m.jsonl" -q 2> "$work/time.txt"
  peak_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time.txt")
  seconds=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['seconds'])" "$work/m.jsonl")
  rows+=("$hidden $batch $opt $updates $plan $peak_kb $seconds")
  echo "hidden $hidden batch $batch $opt/$updates: plan $plan GB, peak $peak_kb kB, epoch ${seconds}s"
done

date=$(date +%Y-%m-%d)
out="$root/benchmarks/results/$date-vm-wide-memory-plan.json"
python3 - "$out" "$ITEMS" "$USERS" "$NNZ" "$THREADS" "${rows[@]}" <<'PY'
import json, math, sys
out, items, users, nnz, threads = sys.argv[1:6]
runs = []
for row in sys.argv[6:]:
    hidden, batch, opt, updates, plan, peak_kb, seconds = row.split()
    peak_gb = int(peak_kb) * 1024 / 1e9
    steps = math.ceil(int(users) / int(batch))
    runs.append({"hidden": int(hidden), "batch": int(batch), "optimizer": opt,
                 "sparse_updates": updates, "plan_gb": float(plan), "peak_rss_gb": round(peak_gb, 3),
                 "peak_over_plan": round(peak_gb / float(plan), 3),
                 "seconds_per_epoch": float(seconds), "steps": steps,
                 "seconds_per_step": round(float(seconds) / steps, 3)})
doc = {"workload": "wide autoencoder, memory plan against peak RSS", "items": int(items),
       "users": int(users), "nnz": int(nnz), "threads": int(threads), "device": "cpu",
       "machine": "2 cores shared with other jobs", "command": "benchmarks/wide/plan_vs_peak.sh",
       "runs": runs}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
print("wrote", out)
PY
