#!/usr/bin/env bash
# CPU time per request of a levee binary, read from /proc/PID/stat
# (utime+stime) around a closed-loop loadgen run: 32 connections, 5 s.
#   bench/h1server-cpu.sh LEVEE_BIN refuse|proxy
# refuse: the upstream has limits {max_concurrency: 1, max_queue: 0} in
# front of a backend that sleeps 1 s, so nearly every request is refused.
# proxy: no limits, a fast backend. Prints one line: requests, CPU ticks,
# µs of CPU per request. Needs BENCH_BIN with backend and loadgen from
# ../shared/bench (go build each into it). Every process it starts is
# stopped by its pid. LEVEE_ACCESS_LOG=true turns the access log on (to a
# file in the scratch dir); LEVEE_TRACING=1 turns tracing on at
# LEVEE_TRACING_SAMPLING (default 0.01), exporting to bench/otlpsink:
#   LEVEE_ACCESS_LOG=true LEVEE_TRACING=1 bench/h1server-cpu.sh bin/levee proxy
set -euo pipefail
bin=$1 mode=$2
bb=${BENCH_BIN:-/tmp/h1b}
dir=$(mktemp -d)
port=${PORT:-18189} bport=$((port + 1)) aport=$((port + 2))
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
if [ "$mode" = refuse ]; then
  "$bb/backend" -listen 127.0.0.1:$bport -sleep 1s >/dev/null 2>&1 & pids+=($!)
  limits="    limits: {max_concurrency: 1, max_queue: 0}"
else
  "$bb/backend" -listen 127.0.0.1:$bport >/dev/null 2>&1 & pids+=($!)
  limits=""
fi
cat >"$dir/levee.yaml" <<YAML
listen: 127.0.0.1:$port
admin: {listen: 127.0.0.1:$aport}
state_dir: $dir/state
log: {level: warn, access: ${LEVEE_ACCESS_LOG:-false}}
$([ -n "${LEVEE_TRACING:-}" ] && echo "tracing: {endpoint: 'http://127.0.0.1:$((port + 3))', sampling: ${LEVEE_TRACING_SAMPLING:-0.01}}")
upstreams:
  bench:
    endpoints: [{address: 127.0.0.1:$bport}]
$limits
routes:
  - {name: all, match: {path_prefix: /}, upstream: bench}
YAML
if [ -n "${LEVEE_TRACING:-}" ]; then
  here=$(cd "$(dirname "$0")/.." && pwd)
  (cd "$here" && go build -o "$dir/otlpsink" ./bench/otlpsink)
  "$dir/otlpsink" -listen "127.0.0.1:$((port + 3))" 2>/dev/null & pids+=($!)
fi
"$bin" run -config "$dir/levee.yaml" >"$dir/levee.log" 2>&1 & lpid=$!; pids+=($lpid)
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$aport/healthz" 2>/dev/null && break
  sleep 0.1
done
"$bb/loadgen" -url "http://127.0.0.1:$port/" -c 32 -d 1s >/dev/null 2>&1 || true # warm-up
ticks() { awk '{print $14 + $15}' "/proc/$lpid/stat"; }
t0=$(ticks)
out=$("$bb/loadgen" -url "http://127.0.0.1:$port/" -c 32 -d 5s 2>&1)
t1=$(ticks)
n=$(echo "$out" | grep -o "completed=[0-9]*" | head -1 | cut -d= -f2)
hz=$(getconf CLK_TCK)
echo "$mode $(basename "$bin") requests=$n ticks=$((t1 - t0)) us_per_req=$(awk -v t=$((t1 - t0)) -v n="$n" -v hz="$hz" 'BEGIN{printf "%.1f", t*1e6/hz/n}')"
echo "$out" | grep RESULT | head -1 >&2 || true
