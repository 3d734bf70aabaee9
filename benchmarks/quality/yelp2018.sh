#!/usr/bin/env bash
# Protocol A on yelp2018 (../shared/design/quality.md): split, train configs/protocol-a-yelp2018.json
# (the autoencoder with learning-rate decay and an inference-only EASE path, both chosen on
# Yelp2018's validation: docs/quality.md) with the epoch chosen on validation, EASE peer with
# lambda chosen on validation, both scored by `sparsenet evaluate`; writes
# benchmarks/results/<date>-<machine>-quality-yelp2018.json.
# Needs the build (make) and benchmarks/.venv (benchmarks/setup-venv.sh). Extra arguments go to
# protocol_a.py (e.g. --no-ease, --epochs N, --config FILE, --seeds 1 for one seed). Three seeds by
# default: the model is selected and trained once per seed (docs/quality.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec benchmarks/quality/protocol_a.py --dataset yelp2018 --seeds 1,2,3 --config configs/protocol-a-yelp2018.json --epochs 40 \
  --ease-lambdas 100,200,500 "$@"
