#!/usr/bin/env bash
# The Python test environment of `make test`: a venv in $1 (default build/pyenv) with pinned
# numpy, scipy, pytest, nanobind (for building the extension module inside the CMake
# build tree, python/CMakeLists.txt). Idempotent: an existing venv with the same pins is kept
# (a stamp file records them), so a warm `make test` spends nothing here.
set -euo pipefail
venv=${1:-build/pyenv}
pins=(numpy==2.3.5 scipy==1.16.3 pytest==8.4.2 nanobind==2.9.2 prometheus-client==0.23.1)
stamp="$venv/.sparsenet-pins"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "${pins[*]}" ]; then
  exit 0
fi
python=${PYTHON:-python3}
if ! "$python" -c 'import venv, sysconfig, os, sys; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)'; then
  echo "setup-venv: $python lacks the venv module or Python.h (Debian: apt-get install python3-venv python3-dev)" >&2
  exit 1
fi
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "${pins[@]}"
echo "${pins[*]}" > "$stamp"
echo "setup-venv: $venv with ${pins[*]}"
