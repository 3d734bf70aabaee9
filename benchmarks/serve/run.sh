#!/usr/bin/env bash
# `sparsenet serve` under load (docs/benchmarks.md, "Serving over HTTP"), beside the in-process
# Recommender on the same model in the same run. Loopback only; every load run is bounded in
# time (DURATION seconds) and in requests (MAX_REQUESTS per run).
#
#   benchmarks/serve/run.sh [BUILD_DIR]     (needs wrk, python3, curl; BUILD_DIR default build)
#
# 1. build/benchmarks/sparsenet_bench_library (benchmarks/library) writes the ML-20M-shaped model
#    (27,278 -> 600 -> 27,278, random weights) and measures the in-process Recommender: 1 and 2
#    service threads with fp16 screening, and recommend_batch of 64 and 256.
# 2. `sparsenet serve` serves that model (fp16 screening on, --threads = the cores, concurrent
#    single queries grouped: --group 16); wrk (one thread, benchmarks/serve/serve.lua) sends the
#    same workload (bodies.py) at 1, 8 and 64 connections: single queries (POST /recommend) and
#    batches of BATCH queries (default 64; POST /recommend/batch). After each run the script
#    waits for the server to go idle: wrk abandons the requests in flight when its time is up,
#    and the server still answers them.
# 3. A reload under load: 8 connections of single queries while POST /reload loads the model
#    RELOADS times; every request must succeed.
# 4. The same server with --group 1 (each single query ranked alone): single queries at 8
#    connections, to show what grouping gives.
# 5. With BASE=DIR (a build folder holding another `sparsenet`, such as one built from main): that
#    server ("base") and this one ("new") alternated, ROUNDS times (default 2): single queries
#    and batches at each of CONNECTIONS; after each pair, the new server again with SLOW (default
#    64) slow connections held open beside the load (benchmarks/serve/slow_clients.py: each sends
#    a request line and a header line every 2 s, never finishing; reopened when the server drops
#    it). Runs are named base-r1-single-c8, new-r1-batch-c64, new-slow64-r1-single-c8, ...
# Writes benchmarks/results/<date>-<MACHINE>-serve[-<SUFFIX>].json and prints a table.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
DURATION=${DURATION:-8}
MAX_REQUESTS=${MAX_REQUESTS:-100000}
RELOADS=${RELOADS:-5}
export BATCH=${BATCH:-64}
MACHINE=${MACHINE:-vm}
CONNECTIONS=${CONNECTIONS:-"1 8 64"}
for tool in wrk python3 curl; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool not found (apt install $tool)" >&2; exit 2; }
done
for f in "$build/sparsenet" "$build/benchmarks/sparsenet_bench_library"; do
  [ -x "$f" ] || { echo "run.sh: $f not found: build first (make build)" >&2; exit 2; }
done
tmp=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

echo "== in-process Recommender (benchmarks/library)"
SPARSENET_BENCH_MODEL="$tmp/model.nc" "$build/benchmarks/sparsenet_bench_library" \
  --benchmark_filter='^Recommend/threads_per_call:1/fp16_screening:1/.*threads:[12]$|^RecommendBatch/batch:(16|64|256)/' \
  --benchmark_out="$tmp/library.json" --benchmark_out_format=json

python3 benchmarks/serve/bodies.py "$tmp"

# start_server EXTRA...: a server ($SERVER_BIN, default this build's) on a free port; sets $server
# and $url.
start_server() {
  "${SERVER_BIN:-$build/sparsenet}" serve -n "$tmp/model.nc" --port 0 --fp16-screening on --max-batch 256 "$@" \
    2>"$tmp/serve.log" &
  server=$!
  port=""
  for _ in $(seq 600); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/serve.log" | grep -o '[0-9]*$' || true)
    if [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null; then break; fi
    sleep 0.2
  done
  curl -sf "http://127.0.0.1:$port/health" >/dev/null || { cat "$tmp/serve.log"; exit 1; }
  url="http://127.0.0.1:$port"
}
# stop_server LABEL: records the server's memory and threads (after its runs), then SIGTERM.
stop_server() {
  echo "${1:-server} $(awk '/^(VmRSS|VmHWM|Threads):/ { printf "%s %s ", $1, $2 }' "/proc/$server/status")" \
    >>"$tmp/proc.txt"
  kill -TERM "$server"
  wait "$server" || server_exit=$?
  server=""
}
server_exit=0

# Waits until the server has answered every request it holds (the answered count stands still
# for 2 s).
idle() {
  local before="" now
  for _ in $(seq 120); do
    now=$(curl -s "$url/metrics" | grep '^sparsenet_requests_total{endpoint="/recommend' |
      awk '{ n += $2 } END { print n + 0 }')
    [ "$now" = "$before" ] && return
    before=$now
    sleep 2
  done
}
# run NAME BODIES PATH CONNECTIONS: one wrk run; its JSON line goes to $tmp/NAME.json.
run() {
  local name=$1 bodies=$2 path=$3 c=$4
  SERVE_BODIES="$tmp/$bodies" SERVE_PATH="$path" SERVE_MAX_REQUESTS=$MAX_REQUESTS \
    wrk -t1 -c"$c" -d"${DURATION}s" --timeout 60s -s benchmarks/serve/serve.lua "$url" \
    >"$tmp/$name.out"
  grep '^{' "$tmp/$name.out" >"$tmp/$name.json"
  echo "$name: $(cat "$tmp/$name.json")"
  idle
}
if [ -n "${BASE:-}" ]; then
  [ -x "$BASE/sparsenet" ] || { echo "run.sh: $BASE/sparsenet not found" >&2; exit 2; }
  echo "== A/B: $BASE/sparsenet (base) and $build/sparsenet (new), alternated"
  for r in $(seq "${ROUNDS:-2}"); do
    for side in base new; do
      if [ "$side" = base ]; then SERVER_BIN="$BASE/sparsenet"; else SERVER_BIN="$build/sparsenet"; fi
      start_server
      for c in $CONNECTIONS; do run "$side-r$r-single-c$c" single.txt /recommend "$c"; done
      for c in $CONNECTIONS; do run "$side-r$r-batch-c$c" batch.txt /recommend/batch "$c"; done
      stop_server "$side-r$r"
    done
    SERVER_BIN="$build/sparsenet"
    start_server
    python3 benchmarks/serve/slow_clients.py "${SLOW:-64}" "$port" >"$tmp/slow-r$r.txt" &
    slow_pid=$!
    sleep 1
    for c in $CONNECTIONS; do run "new-slow${SLOW:-64}-r$r-single-c$c" single.txt /recommend "$c"; done
    kill -TERM "$slow_pid"
    wait "$slow_pid" || true
    stop_server "new-slow-r$r"
  done
  unset SERVER_BIN
fi

echo "== sparsenet serve"
start_server
for c in $CONNECTIONS; do run "single-c$c" single.txt /recommend "$c"; done
for c in $CONNECTIONS; do run "batch-c$c" batch.txt /recommend/batch "$c"; done

echo "== reload under load"
run reload-c8 single.txt /recommend 8 &
wrk_pid=$!
sleep 1
: >"$tmp/reloads.txt"
for _ in $(seq "$RELOADS"); do
  curl -s -o /dev/null -w '%{http_code}\n' -X POST -d '' "$url/reload" >>"$tmp/reloads.txt"
done
wait "$wrk_pid"
curl -s "$url/metrics" >"$tmp/metrics.txt"
stop_server "reload-under-load (after every run above)"

echo "== --group 1: single queries ranked alone"
start_server --group 1
run "single-c8-group1" single.txt /recommend 8
stop_server group1

out="benchmarks/results/$(date -u +%F)-$MACHINE-serve${SUFFIX:+-$SUFFIX}.json"
python3 - "$tmp" "$out" "$load_before" "$server_exit" "$DURATION" "$MAX_REQUESTS" <<'PY'
import json, os, platform, subprocess, sys
tmp, out, load_before, server_exit, duration, max_requests = sys.argv[1:]
lib = json.load(open(f"{tmp}/library.json"))
def run(name):
    return json.load(open(f"{tmp}/{name}.json"))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
in_process = {}
for b in lib["benchmarks"]:
    in_process[b["name"]] = {"queries_per_s": b["items_per_second"], "p50_ms": b["p50_ms"], "p99_ms": b["p99_ms"]}
service = {}
names = sorted(f[:-5] for f in os.listdir(tmp) if f.endswith(".json") and f != "library.json")
slow = {}
for f in sorted(os.listdir(tmp)):
    if f.startswith("slow-r") and f.endswith(".txt"):
        lines = [l for l in open(f"{tmp}/{f}").read().splitlines() if l.startswith("{")]
        slow[f[:-4]] = json.loads(lines[-1]) if lines else None
for name in names:
    r = run(name)
    per_request = int(os.environ["BATCH"]) if "batch" in name else 1
    seconds = r["duration_us"] / 1e6
    r["requests_per_s"] = r["requests"] / seconds
    r["queries_per_s"] = r["requests"] * per_request / seconds
    r["failed"] = r["non_2xx"] + r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"]
    service[name] = r
reloads = open(f"{tmp}/reloads.txt").read().split()
# kB from /proc/PID/status, as MB, per server, after its runs
proc = {}
for line in open(f"{tmp}/proc.txt"):
    parts = line.split()
    i = next(k for k, p in enumerate(parts) if p.endswith(":"))
    fields = dict(zip(parts[i::2], parts[i + 1::2]))
    proc[" ".join(parts[:i])] = {"rss_mb": int(fields.get("VmRSS:", 0)) / 1024,
                                 "peak_rss_mb": int(fields.get("VmHWM:", 0)) / 1024,
                                 "threads": int(fields.get("Threads:", 0))}
result = {
    "context": {
        "date": subprocess.run(["date", "-u", "+%FT%TZ"], capture_output=True, text=True).stdout.strip(),
        "machine": os.environ.get("MACHINE", "vm"), "cpu": cpu, "cpus": os.cpu_count(),
        "load_avg_before": load_before, "load_avg_after": open("/proc/loadavg").read().split()[:3],
        "note": os.environ.get("NOTE", ""), "commit": commit, "kernel": platform.release(),
        "command": "benchmarks/serve/run.sh", "duration_s_per_run": int(duration),
        "max_requests_per_run": int(max_requests),
        "model": "27278 -> 600 (Sigmoid) -> 27278 (Sigmoid), random weights (benchmarks/library)",
        "queries": f"80..120 items, Zipf popularity, k = 10, inputs excluded; batches of {os.environ['BATCH']}",
        "server": "sparsenet serve --fp16-screening on --max-batch 256 (--threads: the cores; a request on one core, or on every free core when nobody waits; --group 16, and --group 1 for single-c8-group1)",
        "client": "wrk -t1 -cN --timeout 60s -s benchmarks/serve/serve.lua, on the same machine",
        "base": os.environ.get("BASE", ""),
        "base_commit": os.environ.get("BASE_COMMIT", ""),
    },
    "in_process": in_process, "service": service, "slow_clients": slow, "server_memory": proc,
    "reload_under_load": {"reload_statuses": reloads, "server_exit_code": int(server_exit),
                          "metrics": [l for l in open(f"{tmp}/metrics.txt").read().splitlines()
                                      if l.startswith(("sparsenet_model", "sparsenet_requests_total", "sparsenet_query_groups", "sparsenet_grouped"))]},
}
json.dump(result, open(out, "w"), indent=2)
print(f"wrote {out}")
print("| run | queries/s | p50 | p99 | failed |")
print("|---|---|---|---|---|")
for name, b in in_process.items():
    print(f"| in-process {name} | {b['queries_per_s']:,.0f} | {b['p50_ms']:.2f} ms | {b['p99_ms']:.2f} ms | - |")
for name, r in service.items():
    print(f"| serve {name} | {r['queries_per_s']:,.0f} | {r['latency_p50_us']/1000:.2f} ms | {r['latency_p99_us']/1000:.2f} ms | {r['failed']} |")
print(f"reload statuses: {' '.join(reloads)}; server exit {server_exit}")
for label, p in proc.items():
    print(f"{label}: RSS {p['rss_mb']:.0f} MB (peak {p['peak_rss_mb']:.0f} MB), {p['threads']} threads")
PY
