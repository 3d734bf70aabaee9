#!/usr/bin/env bash
# The Python tests of `make test`: the extension module is built inside the existing build tree
# (only python/src is compiled: the library is the one already built), against build/pyenv
# (tests/python/setup-venv.sh: pinned numpy, scipy, pytest, nanobind), then pytest runs
# tests/python with that build's package (<build>/python) and CLI. Usage: run.sh [BUILD_DIR]
# [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
shift || true
start=$SECONDS
venv="$build/pyenv"
tests/python/setup-venv.sh "$venv"
python="$(cd "$venv/bin" && pwd)/python"
cache="$build/CMakeCache.txt"
if ! grep -q "^SPARSENET_BUILD_PYTHON:BOOL=ON$" "$cache" ||
   ! grep -q "^Python_EXECUTABLE:[A-Z]*=$python$" "$cache"; then
  cmake -S . -B "$build" -DSPARSENET_BUILD_PYTHON=ON -DPython_EXECUTABLE="$python" >/dev/null
fi
cmake --build "$build" --target sparsenet_python sparsenet_cli -j "${JOBS:-$(nproc)}"
echo "python tests: environment and module ready in $((SECONDS - start)) s"
PYTHONPATH="$PWD/$build/python:$PWD/tests/python" SPARSENET_CLI="$PWD/$build/sparsenet" \
  "$python" -m pytest -q -p no:cacheprovider tests/python "$@"
echo "python tests: $((SECONDS - start)) s in all"
