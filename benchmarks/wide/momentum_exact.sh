#!/usr/bin/env bash
# Exact Momentum on a wide sparse input: the every-row update (SPARSENET_ROW_CATCH_UP=0), the
# row clock with its closed-form catch-up (the default), and lazy updates, on the same binary.
# A network ITEMS -> HIDDEN -> 100 (a narrow output, so the input's update is what grows with
# the width), batch 256, EPOCHS epochs, each mode run REPEATS times in turn. Prints seconds per
# epoch and per step; writes benchmarks/results/<date>-vm-momentum-exact.json.
#
#   benchmarks/wide/momentum_exact.sh [build-dir]   (env: ITEMS, USERS, HIDDEN, EPOCHS, REPEATS)
set -euo pipefail
build=${1:-build}
cli=$(realpath "$build/sparsenet")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ITEMS=${ITEMS:-2000000}
USERS=${USERS:-2048}
HIDDEN=${HIDDEN:-64}
EPOCHS=${EPOCHS:-3}
REPEATS=${REPEATS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$cli" generate -o "$work/in.nc" --users "$USERS" --items "$ITEMS" --nnz $((USERS * 20)) --names gl_input --seed 3 -q
"$cli" generate -o "$work/out.nc" --users "$USERS" --items 100 --nnz $((USERS * 10)) --names gl_output --seed 4 -q
cat > "$work/net.json" <<JSON
{"Version": 0.9, "Name": "wide-in", "Kind": "AutoEncoder", "ErrorFunction": "CrossEntropy",
 "Layers": [{"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "gl_input", "Sparse": true},
            {"Name": "Hidden", "Kind": "Hidden", "N": $HIDDEN, "Activation": "Tanh"},
            {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "gl_output", "Activation": "Sigmoid"}]}
JSON
rows=()
for rep in $(seq "$REPEATS"); do
  for mode in every-row catch-up lazy; do
    env=""; updates=exact
    [ "$mode" = every-row ] && env="SPARSENET_ROW_CATCH_UP=0"
    [ "$mode" = lazy ] && updates=lazy
    env $env "$cli" train -c "$work/net.json" -i "$work/in.nc" -o "$work/out.nc" -n "$work/m.nc" \
      -b 256 -e "$EPOCHS" --optimizer momentum --sparse-updates "$updates" --device cpu \
      --metrics-out "$work/m.jsonl" -q
    secs=$(python3 -c "import json,sys; print(' '.join(str(json.loads(l)['seconds']) for l in open(sys.argv[1])))" "$work/m.jsonl")
    rows+=("$mode $secs")
    echo "$mode: $secs s per epoch"
  done
done
date=$(date +%Y-%m-%d)
out="$root/benchmarks/results/$date-vm-momentum-exact.json"
python3 - "$out" "$ITEMS" "$USERS" "$HIDDEN" "${rows[@]}" <<'PY'
import json, math, statistics, sys
out, items, users, hidden = sys.argv[1:5]
steps = math.ceil(int(users) / 256)
by = {}
for row in sys.argv[5:]:
    f = row.split()
    by.setdefault(f[0], []).extend(float(x) for x in f[1:])
runs = {m: {"epoch_seconds": v, "median_epoch_s": statistics.median(v),
            "median_step_ms": round(1000 * statistics.median(v) / steps, 1)} for m, v in by.items()}
doc = {"workload": "Momentum, exact vs lazy sparse-input updates", "items": int(items),
       "users": int(users), "hidden": int(hidden), "output": 100, "batch": 256, "steps_per_epoch": steps,
       "device": "cpu", "machine": "2 cores shared with other jobs",
       "command": "benchmarks/wide/momentum_exact.sh", "runs": runs}
json.dump(doc, open(out, "w"), indent=1)
print(json.dumps(runs, indent=1))
print("wrote", out)
PY
