#!/usr/bin/env bash
# Conversion and loading benchmark (issue: data pipeline). Generates the ML-20M shape
# (138,493 users x 27,278 items, 20,000,263 interactions) as text in three formats, converts each
# with `sparsenet convert` (3 runs, median; peak RSS from /usr/bin/time), runs the pandas peer
# beside it on the same CSV when numpy/pandas/scipy/netCDF4 are importable, and times loading
# the 20M-nonzero dataset. Prints a table and writes benchmarks/results/<date>-<host>-convert.json.
#
# usage: benchmarks/data/convert_bench.sh [BUILD_DIR=build] [WORK_DIR=/tmp/sparsenet-convert-bench]
set -euo pipefail
build=${1:-build}
work=${2:-/tmp/sparsenet-convert-bench}
bin=$build/sparsenet
load=$build/benchmarks/sparsenet_bench_load
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work" "$root/benchmarks/results"
runs=3

echo "== generating the ML-20M shape as text (csv, dsstne, user-items) in $work"
for fmt in csv dsstne user-items; do
  [ -s "$work/ratings.$fmt" ] || "$bin" generate -o "$work/gen.nc" --users 138493 --items 27278 \
    --nnz 20000263 --seed 1 --text "$work/ratings.$fmt" --text-format "$fmt" -q
done

# run_timed NAME CMD...: appends "NAME seconds peak_kb" for each of $runs runs to $work/times.
run_timed() {
  local name=$1; shift
  for _ in $(seq $runs); do
    /usr/bin/time -f "$name %e %M" -o "$work/one" "$@" > "$work/last.out"
    cat "$work/one" >> "$work/times"
  done
}

: > "$work/times"
for fmt in csv dsstne user-items; do
  rm -f "$work/f.$fmt" "$work/s.$fmt"
  run_timed "sparsenet-$fmt" "$bin" convert -i "$work/ratings.$fmt" --format "$fmt" \
    -o "$work/out.$fmt.nc" -d gl_input -f "$work/f.$fmt" -s "$work/s.$fmt" -c -v
  grep phases "$work/last.out" | sed "s/^/  $fmt: /"
done
peer=none
if python3 -c "import numpy, pandas, scipy, netCDF4" 2>/dev/null; then
  peer=pandas
  run_timed "pandas-csv" python3 "$root/benchmarks/data/pandas_convert.py" "$work/ratings.csv" \
    "$work/peer.nc"
fi
"$load" "$work/out.csv.nc" 5 > "$work/load.json"

python3 - "$work" "$root" "$peer" <<'EOF'
import json, os, platform, statistics, subprocess, sys, datetime
work, root, peer = sys.argv[1:]
runs = {}
for line in open(os.path.join(work, "times")):
    name, sec, kb = line.split()
    runs.setdefault(name, []).append((float(sec), int(kb)))
load = json.load(open(os.path.join(work, "load.json")))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
sizes = {f: os.path.getsize(os.path.join(work, "ratings." + f)) for f in ("csv", "dsstne", "user-items")}
rows = []
print(f"\nconversion of 20,000,263 interactions, {os.cpu_count()} cores ({cpu}), median of {len(next(iter(runs.values())))} runs")
print(f"{'run':22s} {'input MB':>9s} {'median s':>9s} {'peak RSS MB':>12s} {'vs sparsenet-csv':>17s}")
base = statistics.median(s for s, _ in runs["sparsenet-csv"])
for name, rs in runs.items():
    med = statistics.median(s for s, _ in rs)
    peak = max(k for _, k in rs) / 1024
    fmt = name.split("-", 1)[1]
    rows.append({"run": name, "input_bytes": sizes[fmt], "median_s": med,
                 "seconds": [s for s, _ in rs], "peak_rss_mb": round(peak, 1)})
    print(f"{name:22s} {sizes[fmt]/1e6:9.1f} {med:9.2f} {peak:12.0f} {med/base:16.2f}x")
print(f"load (Dataset::read, validated) of {load['nnz']:,} nonzeros: median {load['median_s']:.3f} s")
git = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
versions = {"sparsenet": subprocess.run([os.path.join(root, "build", "sparsenet"), "--version"],
                                        capture_output=True, text=True).stdout.strip()}
if peer == "pandas":
    import numpy, pandas, scipy, netCDF4
    versions.update(numpy=numpy.__version__, pandas=pandas.__version__, scipy=scipy.__version__,
                    netCDF4=netCDF4.__version__)
out = {"benchmark": "convert", "versions": versions, "date": datetime.date.today().isoformat(), "machine": platform.node(),
       "cpu": cpu, "threads": os.cpu_count(), "commit": git, "peer": peer,
       "command": "benchmarks/data/convert_bench.sh", "conversion": rows, "load": load}
path = os.path.join(root, "benchmarks", "results",
                    f"{out['date']}-{platform.node()}-convert.json")
json.dump(out, open(path, "w"), indent=2)
print("wrote", path)
EOF
