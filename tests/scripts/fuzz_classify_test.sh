#!/usr/bin/env bash
# scripts/fuzz.sh's classification of a crash report (first_frame, dependency_crash): a crash
# whose first frame outside the sanitizers is in HDF5 is a known dependency crash, one in
# sparsenet is not, every time. Each log is classified 200 times: under `set -o pipefail` a
# pipeline ending in `head -1` let an earlier stage die of SIGPIPE, and the same HDF5 crash was
# counted as sparsenet's in about a quarter of the runs (CI, 2026-11-28).
# Usage: fuzz_classify_test.sh SOURCE_DIR
set -euo pipefail
root="$1"
logs="$root/tests/scripts/fuzz-logs"
eval "$(sed -n '/^first_frame() {/,/^}/p;/^dependency_crash() {/,/^}/p' "$root/scripts/fuzz.sh")"
declare -F first_frame dependency_crash >/dev/null || { echo "functions not found in fuzz.sh"; exit 1; }
fail=0
for i in $(seq 200); do
    dependency_crash "$logs/hdf5-crash.log" || { echo "run $i: the HDF5 crash not recognised"; fail=1; break; }
    if dependency_crash "$logs/own-crash.log"; then
        echo "run $i: sparsenet's crash taken for a dependency's"; fail=1; break
    fi
done
frame="$(first_frame "$logs/hdf5-crash.log")"
[[ "$frame" == *"H5MM_xfree"* ]] || { echo "first frame: '$frame'"; fail=1; }
exit "$fail"
