#!/usr/bin/env bash
# make demo: generate a dataset with planted structure, train configs/autoencoder.json, report
# Recall@20 of the model beside the popularity baseline, and show top-10 for three users.
set -euo pipefail
bin=${1:-build/sparsenet}
out=demo-out
mkdir -p "$out"

echo "== 1. generate: 3000 users x 2000 items, planted topics, power-law popularity, 20% held out"
"$bin" generate -o "$out/train.nc" --users 3000 --items 2000 --nnz 120000 --factors 20 \
  --seed 7 --holdout 0.2 --heldout-output "$out/heldout.nc" --names gl_input,gl_output

echo
echo "== 2. train configs/autoencoder.json (Adam, 12 epochs)"
"$bin" train -c configs/autoencoder.json -i "$out/train.nc" -n "$out/model.nc" \
  -b 128 -e 12 --optimizer adam --learning-rate 0.002 --seed 7 --metrics-out "$out/metrics.jsonl"

echo
echo "== 3. evaluate on the held-out 20% (train items excluded)"
"$bin" evaluate -n "$out/model.nc" --input "$out/train.nc" --heldout "$out/heldout.nc" -k 20 \
  --popularity

echo
echo "== 4. top-10 for users 0, 1 and 2 (item,score; their own items excluded)"
"$bin" predict -n "$out/model.nc" --input "$out/train.nc" -k 10 -s "$out/recs.txt"
head -n 3 "$out/recs.txt"
echo
echo "all recommendations: $out/recs.txt; per-epoch metrics: $out/metrics.jsonl"
