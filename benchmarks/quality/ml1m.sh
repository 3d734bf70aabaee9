#!/usr/bin/env bash
# Protocol A on ml1m (../shared/design/quality.md): split, train configs/protocol-a-ml1m.json (the
# autoencoder with ML-1M's learning-rate decay and an inference-only EASE path, chosen on
# validation: docs/quality.md) with the epoch chosen on validation, EASE peer with lambda chosen
# on validation, both scored by `sparsenet evaluate`; writes benchmarks/results/<date>-<machine>-quality-ml1m.json.
# Needs the build (make) and benchmarks/.venv (benchmarks/setup-venv.sh). Extra arguments go to
# protocol_a.py (e.g. --no-ease, --epochs N, --config FILE, --seeds 1 for one seed). Three seeds by
# default: the model is selected and trained once per seed (docs/quality.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec benchmarks/quality/protocol_a.py --dataset ml1m --seeds 1,2,3 --config configs/protocol-a-ml1m.json --epochs 90 \
  --ease-lambdas 500,1000,2000 "$@"
