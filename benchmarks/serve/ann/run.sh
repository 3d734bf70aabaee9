#!/usr/bin/env bash
# ANN index benchmark (benchmarks/serve/ann/bench.py; docs/benchmarks-ann.md "ANN index"), bounded,
# loopback, one run: the ML-20M shape (27,278 items, hidden 600) and a 1,000,000-item model
# (hidden 256), both trained an epoch on generated data with planted topics and Zipf popularity;
# exact (fp16 screen) against the ANN indexes in process (the recall-latency curves) and over
# HTTP at 1 and 8 connections on 2 cores. Writes benchmarks/results/<date>-<MACHINE>-<NAME>.json
# and docs/img/<NAME>-recall-latency.png.
#
#   benchmarks/serve/ann/run.sh [BUILD_DIR]     (needs wrk, curl, the build's Python module and
#                                                matplotlib for the plot: benchmarks/.venv's, or
#                                                PLOT_PY's)
# SHAPES="ml20m 1m" (default) picks the shapes (10m: 10,000,000 items x 64, SGD; 1m-softmax:
# the 1m shape with a SoftMax output); ITEMS_1M
# overrides the 1m shape's item count.
# INDEXES="ivf:fp16,hnsw:fp16" (default): one index per KIND:VECTORS from each model, the first
# served over HTTP ("ann"), with BF16 input weights too ("ann-after") when BF16_INPUT=1 (the
# default). PROBES / HNSW_PROBES override the curves' knobs (ivf cells scanned, hnsw efSearch);
# NAME the result's workload (serve-ann). PEERS=1 adds the search alone of the ivf indexes beside
# faiss's IndexIVFFlat (inner product) over the same vectors, Debian's faiss 1.7.3 in C++
# (build/benchmarks/sparsenet_bench_ann_search, linked when libfaiss-dev is installed) and PyPI's
# faiss-cpu 1.15.1 from Python, and hnswlib 0.8.0 (PyPI; both installed into $PY's environment
# when missing): peers.py; SERVE=0 skips the HTTP runs. WORK=<folder>: keep (and with REUSE=1 reuse) the large
# shape's files there; REUSE_TIMES=<result file> gives the reused files' generation, training
# and build times.
set -euo pipefail
cd "$(dirname "$0")/../../.."
build=${1:-build}
MACHINE=${MACHINE:-vm}
SHAPES=${SHAPES:-"ml20m 1m"}
ITEMS_1M=${ITEMS_1M:-1000000}
INDEXES=${INDEXES:-ivf:fp16,hnsw:fp16}
BF16_INPUT=${BF16_INPUT:-1}
PROBES=${PROBES:-16,32,64,96,128,192,256}
HNSW_PROBES=${HNSW_PROBES:-128,512,2048}
NAME=${NAME:-serve-ann}
WORK=${WORK:-}
REUSE=${REUSE:-0}
index_args=(--indexes "$INDEXES" --probes "$PROBES" --hnsw-probes "$HNSW_PROBES")
[ "$BF16_INPUT" = 1 ] && index_args+=(--bf16-input)
[ "${PEERS:-0}" = 1 ] && index_args+=(--peers)
[ "${SERVE:-1}" = 0 ] && index_args+=(--skip-serve)
PY=${PY:-$build/pyenv/bin/python}
[ -x "$PY" ] || PY=python3
export PYTHONPATH="$PWD/$build/python${PYTHONPATH:+:$PYTHONPATH}"
if [ "${PEERS:-0}" = 1 ] && ! "$PY" -c "import faiss, hnswlib" 2>/dev/null; then
  "$PY" -m pip install --quiet faiss-cpu==1.15.1 hnswlib==0.8.0
fi
export MACHINE
date=$(date -u +%Y-%m-%d)
parts=()
for shape in $SHAPES; do
  out=$(mktemp --suffix=.json)
  case $shape in
    ml20m)
      "$PY" benchmarks/serve/ann/bench.py --label ml20m --items 27278 --users 20000 \
        --heldout 1000 --per-user 100 --hidden 600 --epochs 1 "${index_args[@]}" \
        --cli "$build/sparsenet" --out "$out" ;;
    1m)
      "$PY" benchmarks/serve/ann/bench.py --label "$((ITEMS_1M / 1000))k" --items "$ITEMS_1M" \
        --users 20000 --heldout 1000 --per-user 50 --hidden 256 --epochs 1 --batch 256 \
        --exact-queries 200 --duration 8 "${index_args[@]}" \
        ${WORK:+--work "$WORK"} $([ "$REUSE" = 1 ] && echo --reuse) \
        ${REUSE_TIMES:+--reuse-times "$REUSE_TIMES"} \
        --cli "$build/sparsenet" --out "$out" ;;
    10m)
      # 10,000,000 items x 64, trained with SGD at batch 64 (Adam's state does not fit 24 GB
      # beside the index build: train --dry-run), 1,000 held-out users.
      "$PY" benchmarks/serve/ann/bench.py --label 10m --items 10000000 \
        --users 20000 --heldout 1000 --per-user 50 --hidden 64 --epochs 1 --batch 64 \
        --optimizer sgd --learning-rate 0.05 --exact-queries 200 --duration 8 "${index_args[@]}" \
        ${WORK:+--work "$WORK"} $([ "$REUSE" = 1 ] && echo --reuse) \
        ${REUSE_TIMES:+--reuse-times "$REUSE_TIMES"} \
        --cli "$build/sparsenet" --out "$out" ;;
    1m-softmax)
      # The 1m shape with Mult-DAE's SoftMax output, trained with CrossEntropy.
      "$PY" benchmarks/serve/ann/bench.py --label 1m-softmax --items 1000000 --softmax \
        --users 20000 --heldout 1000 --per-user 50 --hidden 256 --epochs 1 --batch 256 \
        --exact-queries 200 --duration 8 "${index_args[@]}" \
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
# The plot needs matplotlib: the benchmarks' venv has it (benchmarks/setup-venv.sh).
plot_py=${PLOT_PY:-benchmarks/.venv/bin/python}
[ -x "$plot_py" ] || plot_py=/usr/bin/python3
"$plot_py" benchmarks/serve/ann/plot.py "$result" "docs/img/$NAME-recall-latency.png"
echo "wrote $result"
