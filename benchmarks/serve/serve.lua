-- wrk script of benchmarks/serve/run.sh: POSTs the bodies of $SERVE_BODIES (one JSON body per
-- line) to $SERVE_PATH in turn, stops each thread after $SERVE_MAX_REQUESTS answers (0: only
-- wrk's -d bounds the run), and prints one JSON line of results at the end.
local bodies = {}
for line in io.lines(os.getenv("SERVE_BODIES")) do
  bodies[#bodies + 1] = line
end
local path = os.getenv("SERVE_PATH") or "/recommend"
local max_requests = tonumber(os.getenv("SERVE_MAX_REQUESTS") or "0")
local headers = { ["Content-Type"] = "application/json" }
sent = 0  -- global: setup() gives each thread its own start
local answered = 0

function setup(thread)
  -- Each thread starts at another body (threads have their own Lua state).
  thread:set("sent", math.random(0, #bodies - 1))
end

function request()
  sent = sent + 1
  return wrk.format("POST", path, headers, bodies[(sent % #bodies) + 1])
end

function response(status, headers, body)
  answered = answered + 1
  if max_requests > 0 and answered >= max_requests then
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "non_2xx": %d, "connect_errors": %d, ' ..
    '"read_errors": %d, "write_errors": %d, "timeouts": %d, "latency_p50_us": %d, ' ..
    '"latency_p90_us": %d, "latency_p99_us": %d, "latency_max_us": %d, "latency_mean_us": %.1f}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    latency.mean))
end
