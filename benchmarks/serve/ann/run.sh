#!/usr/bin/env bash
# ANN index benchmark (benchmarks/serve/ann/bench.py; docs/benchmarks.md "ANN index"), bounded,
# loopback, one run: the ML-20M shape (27,278 items, hidden 600) and a 1,000,000-item model
# (hidden 256), both trained briefly on generated data with Zipf popularity; exact (fp16 screen)
# against the ANN index in process (the recall-latency curve) and over HTTP at 1 and 8
# connections on 2 cores. Writes benchmarks/results/<date>-<MACHINE>-serve-ann.json and
# docs/img/serve-ann-recall-latency.png.
#
#   benchmarks/serve/ann/run.sh [BUILD_DIR]     (needs wrk, curl, the build's Python module and
#                                                /usr/bin/python3 with matplotlib for the plot)
# SHAPES="ml20m 1m" (default) picks the shapes; ITEMS_1M overrides the large one's item count.
# VECTORS="fp32,fp16,bf16" (default fp32): one index per precision of the stored vectors, the
# first served as "ann", AFTER (default the last) as "ann-after", with BF16 input weights when
# BF16_INPUT=1. PROBES overrides the large shape's efSearch values; NAME the result's workload
# (serve-ann). WORK=<folder>: keep (and with REUSE=1 reuse) the large shape's files there;
# REUSE_TIMES=<result file> gives the reused files' generation, training and build times.
# BUILD_THREADS=1 builds each index in item order (hnswlib's parallel insertion gives graphs
# whose recall varies from build to build on some models: docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/../../.."
build=${1:-build}
MACHINE=${MACHINE:-vm}
SHAPES=${SHAPES:-"ml20m 1m"}
ITEMS_1M=${ITEMS_1M:-1000000}
VECTORS=${VECTORS:-fp32}
AFTER=${AFTER:-}
BF16_INPUT=${BF16_INPUT:-0}
PROBES=${PROBES:-100,128,192,256,384,512}
NAME=${NAME:-serve-ann}
WORK=${WORK:-}
REUSE=${REUSE:-0}
BUILD_THREADS=${BUILD_THREADS:-0}
vector_args=(--vectors "$VECTORS" --build-threads "$BUILD_THREADS")
[ -n "$AFTER" ] && vector_args+=(--after "$AFTER")
[ "$BF16_INPUT" = 1 ] && vector_args+=(--bf16-input)
PY=${PY:-$build/pyenv/bin/python}
[ -x "$PY" ] || PY=python3
export PYTHONPATH="$PWD/$build/python${PYTHONPATH:+:$PYTHONPATH}"
export MACHINE
date=$(date -u +%Y-%m-%d)
parts=()
for shape in $SHAPES; do
  out=$(mktemp --suffix=.json)
  case $shape in
    ml20m)
      "$PY" benchmarks/serve/ann/bench.py --label ml20m --items 27278 --users 20000 \
        --heldout 1000 --per-user 100 --hidden 600 --steps 60 --probes 100,128,192,256,384 \
        "${vector_args[@]}" --cli "$build/sparsenet" --out "$out" ;;
    1m)
      "$PY" benchmarks/serve/ann/bench.py --label "$((ITEMS_1M / 1000))k" --items "$ITEMS_1M" \
        --users 6000 --heldout 1000 --per-user 40 --hidden 256 --steps 20 --batch 256 \
        --probes "$PROBES" --exact-queries 200 --duration 8 "${vector_args[@]}" \
        ${WORK:+--work "$WORK"} $([ "$REUSE" = 1 ] && echo --reuse) \
        ${REUSE_TIMES:+--reuse-times "$REUSE_TIMES"} \
        --cli "$build/sparsenet" --out "$out" ;;
    *) echo "run.sh: unknown shape $shape" >&2; exit 2 ;;
  esac
  parts+=("$out")
done
result=benchmarks/results/$date-$MACHINE-$NAME.json
python3 - "$result" "$NAME" "${parts[@]}" <<'PYEOF'
import json, sys
out = {"workload": sys.argv[2], "shapes": [json.load(open(p)) for p in sys.argv[3:]]}
json.dump(out, open(sys.argv[1], "w"), indent=1)
PYEOF
rm -f "${parts[@]}"
/usr/bin/python3 benchmarks/serve/ann/plot.py "$result" "docs/img/$NAME-recall-latency.png"
echo "wrote $result"
