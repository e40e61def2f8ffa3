#!/usr/bin/env bash
# Plugs levee into ../shared/bench (proxy-compare.sh / overload.sh) as an
# --extra proxy: writes a levee config for $BENCH_LISTEN and $BENCH_UPSTREAMS
# into $BENCH_RUN_DIR, then execs levee (so levee leads the process group).
#   ../shared/bench/proxy-compare.sh --extra 'levee=exec bench/levee-extra.sh'
# In overload mode LEVEE_LIMIT picks levee's protection: "adaptive" (the
# default: max_concurrency: adaptive with every default, so never told the
# capacity, not even as a queue size), "static" (max_concurrency and
# max_queue $BENCH_CAPACITY, queue_timeout 50ms, like HAProxy's queue
# config; LEVEE_MAX_QUEUE overrides its queue, for experiments) or "none".
#   MODE=open CAPACITY=20 SERVICE_MS=20 ../shared/bench/overload.sh \
#     --extra 'levee-adaptive=LEVEE_LIMIT=adaptive exec bench/levee-extra.sh' \
#     --extra 'levee-static=LEVEE_LIMIT=static exec bench/levee-extra.sh'
# LEVEE_ACCESS_LOG=true turns the access log on (to stderr). LEVEE_TRACING=1
# turns tracing on with sampling LEVEE_TRACING_SAMPLING (default 0.01),
# exporting to bench/otlpsink (an OTLP receiver that discards), started
# here in levee's process group so that the harness stops both:
#   ../shared/bench/proxy-compare.sh --proxies nginx \
#     --extra 'levee-off=exec bench/levee-extra.sh' \
#     --extra 'levee-traced=LEVEE_ACCESS_LOG=true LEVEE_TRACING=1 exec bench/levee-extra.sh'
set -euo pipefail
: "${BENCH_LISTEN:?}" "${BENCH_UPSTREAMS:?}" "${BENCH_RUN_DIR:?}"
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${LEVEE_BIN:-$here/bin/levee}
[ -x "$bin" ] || (cd "$here" && make -s build)
port=${BENCH_LISTEN##*:}
cfg=$BENCH_RUN_DIR/levee.yaml
{
  echo "listen: $BENCH_LISTEN"
  echo "admin: {listen: 127.0.0.1:$((port + 1000))}"
  echo "state_dir: $BENCH_RUN_DIR/levee-state"
  echo "log: {level: warn, access: ${LEVEE_ACCESS_LOG:-false}}"
  if [ -n "${LEVEE_TRACING:-}" ]; then
    echo "tracing: {endpoint: 'http://127.0.0.1:$((port + 2000))', sampling: ${LEVEE_TRACING_SAMPLING:-0.01}}"
  fi
  echo "upstreams:"
  echo "  bench:"
  echo "    endpoints:"
  IFS=, read -ra ups <<<"$BENCH_UPSTREAMS"
  for u in "${ups[@]}"; do echo "      - {address: $u, weight: 1}"; done
  if [ "${BENCH_MODE:-compare}" = overload ]; then
    case ${LEVEE_LIMIT:-adaptive} in
      adaptive) echo "    limits: {max_concurrency: adaptive}" ;;  # every default: never told the capacity
      static) echo "    limits: {max_concurrency: ${BENCH_CAPACITY:-50}, max_queue: ${LEVEE_MAX_QUEUE:-${BENCH_CAPACITY:-50}}, queue_timeout: 50ms}" ;;
      none) ;;
      *) echo "levee-extra: LEVEE_LIMIT must be adaptive, static or none" >&2; exit 2 ;;
    esac
  fi
  echo "routes:"
  echo "  - {name: all, match: {path_prefix: /}, upstream: bench}"
} >"$cfg"
if [ -n "${LEVEE_TRACING:-}" ]; then
  sink=$BENCH_RUN_DIR/otlpsink
  (cd "$here" && go build -o "$sink" ./bench/otlpsink)
  "$sink" -listen "127.0.0.1:$((port + 2000))" 2>>"$BENCH_RUN_DIR/otlpsink.log" &
fi
exec "$bin" run -config "$cfg"
