-- wrk script for `croupier bench serve`: POST prepared decide requests, round robin.
-- The bodies are prepared by the Python side (one per line in BENCH_BODIES, path first,
-- a tab, then the JSON body), so the load generator does no work per request.
-- With BENCH_SERVERS ("host:port,host:port", one wrk thread each), thread k sends to the
-- k-th server the bodies in BENCH_BODIES.k: the games routed to that server by id.
-- With BENCH_THINK_MS > 0 each connection (a game) waits before each request for a think
-- time drawn from an exponential with that mean (games that think independently, as players
-- and engines do, not in lockstep); latency is still timed from the request's write.

local requests = {}
local n = 0
local threads_made = 0

function setup(thread)
  local servers = os.getenv("BENCH_SERVERS")
  if servers == nil then
    return
  end
  threads_made = threads_made + 1
  local k = 0
  for host, port in string.gmatch(servers, "([^,:]+):(%d+)") do
    k = k + 1
    if k == threads_made then
      thread.addr = wrk.lookup(host, port)[1]
    end
  end
  thread:set("bodies_path", os.getenv("BENCH_BODIES") .. "." .. threads_made)
end

function init(args)
  local file = assert(io.open(bodies_path or os.getenv("BENCH_BODIES"), "r"))
  for line in file:lines() do
    local tab = string.find(line, "\t", 1, true)
    local path = string.sub(line, 1, tab - 1)
    local body = string.sub(line, tab + 1)
    n = n + 1
    requests[n] = wrk.format("POST", path, {["Content-Type"] = "application/json"}, body)
  end
  file:close()
end

local think_ms = tonumber(os.getenv("BENCH_THINK_MS") or "0")
if think_ms > 0 then
  math.randomseed(os.time())
  function delay()
    return math.floor(-think_ms * math.log(1 - math.random()))
  end
end

local i = 0
function request()
  i = i % n + 1
  return requests[i]
end

function done(summary, latency, requests)
  local out = io.open(os.getenv("BENCH_OUT"), "w")
  out:write(string.format(
    '{"requests": %d, "duration_us": %d, "errors_connect": %d, "errors_read": %d, ' ..
    '"errors_write": %d, "errors_status": %d, "errors_timeout": %d, ' ..
    '"p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d}\n',
    summary.requests, summary.duration, summary.errors.connect, summary.errors.read,
    summary.errors.write, summary.errors.status, summary.errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
  out:close()
end
