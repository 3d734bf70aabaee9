#!/usr/bin/env bash
# Creates benchmarks/.venv with the peers' Python packages (PyTorch from the default index,
# numpy, pandas, scipy, netCDF4; matplotlib for the plots). Idempotent; used by `make bench`,
# never by `make test`.
set -euo pipefail
venv=$(cd "$(dirname "$0")" && pwd)/.venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import torch, numpy, pandas, scipy, netCDF4, matplotlib" 2>/dev/null; then
  "$venv/bin/pip" install --quiet torch numpy pandas scipy netCDF4 matplotlib
fi
"$venv/bin/python" -c "import torch; print('benchmark venv:', '$venv', 'torch', torch.__version__)"
