#!/usr/bin/env bash
# CPU per refused request, open loop: levee (or NGINX) in front of a backend
# that sleeps 1 s behind a limit of 1, so nearly every request is a 503.
# The loadgen sends RATE requests/s (default 5,000) for 6 s; the proxy's
# CPU (utime+stime from /proc) is read over the middle 3 s, and with
# PERF=1 also perf stat's system calls, context switches and futex,
# nanosleep and epoll_pwait calls. An open loop leaves the proxy idle
# between requests, as real traffic does, which is where the Go runtime's
# wake-ups cost most (docs/performance.md).
#   bench/refuse-open.sh bin/levee      # or: bench/refuse-open.sh nginx
# Needs BENCH_BIN with backend and loadgen from ../shared/bench (the
# shared bench builds them into ../shared/bench/bin). Every process it
# starts is stopped by its pid.
set -euo pipefail
target=$1
bb=${BENCH_BIN:-$(cd "$(dirname "$0")/.." && pwd)/../shared/bench/bin}
rate=${RATE:-5000}
dir=$(mktemp -d)
port=${PORT:-18189} bport=$((${PORT:-18189} + 1)) aport=$((${PORT:-18189} + 2))
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
"$bb/backend" -listen 127.0.0.1:$bport -sleep 1s >/dev/null 2>&1 & pids+=($!)
if [ "$target" = nginx ]; then
  mkdir -p "$dir/nginx"
  cat >"$dir/nginx/nginx.conf" <<CONF
worker_processes 2;
daemon off;
pid nginx.pid;
error_log stderr crit;
events { worker_connections 8192; }
http {
  access_log off;
  limit_conn_zone \$server_name zone=inflight:1m;
  upstream backend { server 127.0.0.1:$bport; keepalive 64; }
  server {
    listen 127.0.0.1:$port reuseport backlog=4096;
    server_name refuse;  # limit_conn ignores an empty key
    limit_conn inflight 1;
    limit_conn_status 503;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
CONF
  nginx -p "$dir/nginx/" -e stderr -c "$dir/nginx/nginx.conf" >"$dir/proxy.log" 2>&1 & ppid=$!; pids+=($ppid)
  sleep 1
  measured=$(pgrep -P "$ppid" | paste -sd,)
else
  cat >"$dir/levee.yaml" <<YAML
listen: 127.0.0.1:$port
admin: {listen: 127.0.0.1:$aport}
state_dir: $dir/state
log: {level: warn, access: false}
upstreams:
  bench:
    endpoints: [{address: 127.0.0.1:$bport}]
    limits: {max_concurrency: 1, max_queue: 0}
routes:
  - {name: all, match: {path_prefix: /}, upstream: bench}
YAML
  "$target" run -config "$dir/levee.yaml" >"$dir/proxy.log" 2>&1 & ppid=$!; pids+=($ppid)
  sleep 1
  measured=$ppid
fi
"$bb/loadgen" -url "http://127.0.0.1:$port/" -rate "$rate" -c 200 -d 6s >"$dir/lg.out" 2>&1 & gpid=$!
sleep 1.5
ticks() { local t=0 p; for p in ${measured//,/ }; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
t0=$(ticks)
if [ "${PERF:-0}" = 1 ]; then
  perf stat -e raw_syscalls:sys_enter,context-switches,syscalls:sys_enter_futex,syscalls:sys_enter_nanosleep,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_epoll_wait \
    -p "$measured" -o "$dir/perf.out" -- sleep 3 >/dev/null 2>&1
else
  sleep 3
fi
t1=$(ticks)
wait "$gpid"
reqs=$((rate * 3))
hz=$(getconf CLK_TCK)
echo "$(basename "$target") rate=$rate ticks_3s=$((t1 - t0)) us_per_req=$(awk -v t=$((t1 - t0)) -v n=$reqs -v hz="$hz" 'BEGIN{printf "%.1f", t*1e6/hz/n}')" \
  "$(grep -o 'nok_p50_ms=[0-9.]*' "$dir/lg.out")"
if [ -f "$dir/perf.out" ]; then
  awk -v n=$reqs '/raw_syscalls|context-switches|sys_enter_/ && $1 ~ /^[0-9]/ { gsub(",", "", $1); printf "  %-36s %6.2f per request\n", $2, $1 / n }' "$dir/perf.out"
fi
