#!/usr/bin/env bash
# System calls, context switches and wake-ups per proxied request, counted
# (not timed), so that a busy machine moves them little: levee (or NGINX)
# in front of two loopback backends (../shared/bench's backend, SIZE-byte
# bodies), wrk -t1 -cCONNS for DURATION seconds with keep-alive, and
# `perf stat -p` on the proxy's process(es) for the whole wrk run; every
# count is divided by the requests wrk completed.
#   bench/syscalls.sh bin/levee          # or another levee binary (an A/B)
#   bench/syscalls.sh nginx              # NGINX, 2 workers, as proxy-compare's
#   SIZE=4096 CONNS=64 DURATION=10 bench/syscalls.sh bin/levee
#   STRACE=1 bench/syscalls.sh bin/levee # strace -c -f instead: calls and
#                                        # errors (EAGAIN) per system call,
#                                        # much slower, so fewer requests
# EVENTS adds perf events, e.g. a uprobe counting read-deadline changes
# (internal/poll.setDeadlineImpl; a runtime timer modification each):
#   a=$(go tool nm bin/levee | awk '$3=="internal/poll.setDeadlineImpl"{print $1}')
#   perf probe -x bin/levee -a "dl=$(printf 0x%x $((0x$a - 0x400000)))"
#   EVENTS=probe_levee:dl bench/syscalls.sh bin/levee
# SHARED_BENCH: ../shared/bench (else /work/shared/bench). Ports PORT..PORT+3 (default 18289..18292), away from proxy-compare's.
# Every process it starts is stopped by its pid.
set -euo pipefail
target=${1:?usage: bench/syscalls.sh bin/levee|nginx}
here=$(cd "$(dirname "$0")/.." && pwd)
size=${SIZE:-64} conns=${CONNS:-64} dur=${DURATION:-10}
port=${PORT:-18289} b1=$((${PORT:-18289} + 1)) b2=$((${PORT:-18289} + 2)) aport=$((${PORT:-18289} + 3))
shared=${SHARED_BENCH:-$here/../shared/bench}
[ -d "$shared" ] || shared=/work/shared/bench
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
backend=${BENCH_BIN:-$shared/bin}/backend
if [ ! -x "$backend" ]; then
  backend=$dir/backend
  (cd "$shared" && GOTOOLCHAIN=local go build -o "$backend" ./backend)
fi
"$backend" -listen 127.0.0.1:$b1 -size "$size" >/dev/null 2>&1 & pids+=($!)
"$backend" -listen 127.0.0.1:$b2 -size "$size" >/dev/null 2>&1 & pids+=($!)
if [ "$target" = nginx ]; then
  mkdir -p "$dir/nginx"
  sed -e "s/127.0.0.1:18081/127.0.0.1:$b1/; s/127.0.0.1:18082/127.0.0.1:$b2/; s/127.0.0.1:18083/127.0.0.1:$port/" \
    "$shared/conf/nginx.conf" >"$dir/nginx/nginx.conf"
  nginx -p "$dir/nginx/" -e stderr -c "$dir/nginx/nginx.conf" >"$dir/proxy.log" 2>&1 & ppid=$!; pids+=($ppid)
  name=nginx
else
  cat >"$dir/levee.yaml" <<YAML
listen: 127.0.0.1:$port
admin: {listen: 127.0.0.1:$aport}
state_dir: $dir/state
log: {level: warn, access: false}
upstreams:
  bench:
    endpoints: [{address: 127.0.0.1:$b1, weight: 1}, {address: 127.0.0.1:$b2, weight: 1}]
routes:
  - {name: all, match: {path_prefix: /}, upstream: bench}
YAML
  if [ "${STRACE:-0}" = 1 ]; then
    strace -f -c -o "$dir/strace.out" -e trace=network,read,write,writev,epoll_wait,epoll_pwait,futex,nanosleep \
      "$target" run -config "$dir/levee.yaml" >"$dir/proxy.log" 2>&1 & ppid=$!; pids+=($ppid)
  else
    "$target" run -config "$dir/levee.yaml" >"$dir/proxy.log" 2>&1 & ppid=$!; pids+=($ppid)
  fi
  name=$(basename "$target")
fi
ok=0
for _ in $(seq 300); do # up to 30 s for a 200 (a busy machine)
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/" || true)" = 200 ] && { ok=1; break; }
  sleep 0.1
done
[ $ok = 1 ] || { echo "$target: no 200 on 127.0.0.1:$port within 30 s"; tail -5 "$dir/proxy.log"; exit 1; }
if [ "$target" = nginx ]; then measured=$(pgrep -P "$ppid" | paste -sd,); else measured=$ppid; fi
wrk -t1 -c"$conns" -d2s "http://127.0.0.1:$port/" >/dev/null # warm: connections, pools
if [ "${STRACE:-0}" = 1 ]; then
  [ "$target" != nginx ] || { echo "STRACE=1 is for levee (strace NGINX yourself)"; exit 2; }
  # strace counts from levee's start; the warm-up and the checks are a few
  # hundred requests out of DURATION seconds of wrk.
  wrk -t1 -c"$conns" -d"${dur}s" "http://127.0.0.1:$port/" >"$dir/wrk.out"
  reqs=$(awk '/requests in/ {print $1}' "$dir/wrk.out")
  kill -INT "$ppid"; wait "$ppid" 2>/dev/null || true
  echo "$name size=$size conns=$conns requests=$reqs (strace -c -f; the warm-up's requests are counted too)"
  awk -v n="$reqs" '$1 ~ /^[0-9.]+$/ && NF >= 5 { calls=$4; errs=(NF==6)?$5:0; sc=$NF; printf "  %-14s %7.2f calls/req  %6.2f errors/req\n", sc, calls/n, errs/n }' "$dir/strace.out"
  exit 0
fi
perf stat -e raw_syscalls:sys_enter,context-switches,cpu-migrations,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendto,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_futex,syscalls:sys_enter_nanosleep,syscalls:sys_enter_setsockopt,syscalls:sys_enter_getsockopt${EVENTS:+,$EVENTS} \
  -p "$measured" -o "$dir/perf.out" -- wrk -t1 -c"$conns" -d"${dur}s" "http://127.0.0.1:$port/" >"$dir/wrk.out" 2>&1
reqs=$(awk '/requests in/ {print $1}' "$dir/wrk.out")
rps=$(awk '/Requests\/sec/ {print $2}' "$dir/wrk.out")
echo "$name size=$size conns=$conns duration=${dur}s requests=$reqs req/s=$rps"
awk -v n="$reqs" '/raw_syscalls|context-switches|cpu-migrations|sys_enter_|probe/ && $1 ~ /^[0-9]/ { gsub(",", "", $1); printf "  %-36s %7.3f per request\n", $2, $1 / n }' "$dir/perf.out"
