#!/bin/sh
# The configure-time refusal of compilers older than the supported ones (CMakeLists.txt: GCC 11,
# Clang 14): a wrapper around this build's C and C++ compilers that makes them identify as GCC 10
# (they redefine __GNUC__, which CMake's compiler identification reads) must stop `cmake`
# configuring with an error that names the compiler found and the minimum versions.
#
#   old_compiler_refused.sh SOURCE_DIR CC CXX
set -u
src=$1; cc=$2; cxx=$3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
printf '#!/bin/sh\nexec "%s" -U__GNUC__ -D__GNUC__=10 "$@"\n' "$cc" > "$work/gcc"
printf '#!/bin/sh\nexec "%s" -U__GNUC__ -D__GNUC__=10 "$@"\n' "$cxx" > "$work/g++"
chmod +x "$work/gcc" "$work/g++"
if CC="$work/gcc" CXX="$work/g++" cmake -S "$src" -B "$work/build" -DSPARSENET_ENABLE_CUDA=OFF \
    > "$work/out.txt" 2>&1; then
    echo "FAIL: cmake configured with a compiler that says it is GCC 10"; cat "$work/out.txt"; exit 1
fi
for want in "is GCC 10" "needs" "GCC >= 11 or Clang >= 14"; do
    if ! tr '\n' ' ' < "$work/out.txt" | tr -s ' ' | grep -q "$want"; then
        echo "FAIL: the error does not say '$want':"; cat "$work/out.txt"; exit 1
    fi
done
echo "ok: $(grep -A3 'CMake Error' "$work/out.txt" | tr '\n' ' ' | tr -s ' ')"
