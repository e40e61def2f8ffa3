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
# LEVEE_RATELIMIT=local puts an anonymous rate limit on the route (10^9/s,
# never refusing: the cost of the decision alone); LEVEE_RATELIMIT=redis
# does the same with cluster.redis, starting a redis-server on
# 127.0.0.1:$LEVEE_REDIS_PORT (default 16379) in levee's process group, so
# the harness stops both (docs/cluster.md, "Speed"; bench/cluster-compare.sh
# runs this pair and prints the ratio and round trips):
#   ../shared/bench/proxy-compare.sh --proxies direct \
#     --extra 'limits-local=LEVEE_RATELIMIT=local exec bench/levee-extra.sh' \
#     --extra 'limits-redis=LEVEE_RATELIMIT=redis exec bench/levee-extra.sh'
# With LEVEE_RATELIMIT=redis a sampler (in the same process group) appends
# to $BENCH_RUN_DIR/redis-stats.log, every 2 s, Redis's EVALSHA calls and
# read events (INFO commandstats / stats: total_reads_processed, one per
# pipeline it reads) and the requests levee answered (levee_requests_total),
# tagged with levee's pid: bench/cluster-compare.sh divides them into round
# trips per request.
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
  case ${LEVEE_RATELIMIT:-none} in
    none) echo "  - {name: all, match: {path_prefix: /}, upstream: bench}" ;;
    local | redis) echo "  - {name: all, match: {path_prefix: /}, upstream: bench, anonymous_limits: {rate: 1000000000, burst: 1000000000}}" ;;
    *) echo "levee-extra: LEVEE_RATELIMIT must be none, local or redis" >&2; exit 2 ;;
  esac
  if [ "${LEVEE_RATELIMIT:-none}" = redis ]; then
    echo "cluster: {node_id: bench, redis: {address: 127.0.0.1:${LEVEE_REDIS_PORT:-16379}}}"
  fi
} >"$cfg"
if [ "${LEVEE_RATELIMIT:-none}" = redis ]; then
  redis-server --bind 127.0.0.1 --port "${LEVEE_REDIS_PORT:-16379}" --save '' --appendonly no \
    --daemonize no --dir "$BENCH_RUN_DIR" >"$BENCH_RUN_DIR/redis.log" 2>&1 &
  for _ in $(seq 100); do # up to 5 s for PING
    [ "$(redis-cli -p "${LEVEE_REDIS_PORT:-16379}" ping 2>/dev/null)" = PONG ] && break
    sleep 0.05
  done
fi
if [ -n "${LEVEE_TRACING:-}" ]; then
  sink=$BENCH_RUN_DIR/otlpsink
  (cd "$here" && go build -o "$sink" ./bench/otlpsink)
  "$sink" -listen "127.0.0.1:$((port + 2000))" 2>>"$BENCH_RUN_DIR/otlpsink.log" &
fi
if [ "${LEVEE_RATELIMIT:-none}" = redis ]; then
	# The sampler needs levee's pid: levee is started in the background
	# here and waited for (the harness stops the whole group).
	"$bin" run -config "$cfg" &
	levee=$!
	(
		set +e +o pipefail # a sample that fails (levee not listening yet) is written as 0
		rport=${LEVEE_REDIS_PORT:-16379} admin=127.0.0.1:$((port + 1000))
		while kill -0 "$levee" 2>/dev/null; do
			evalsha=$(redis-cli -p "$rport" info commandstats 2>/dev/null | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p')
			reads=$(redis-cli -p "$rport" info stats 2>/dev/null | sed -n 's/^total_reads_processed:\([0-9]*\).*/\1/p')
			reqs=$(curl -s --max-time 1 "http://$admin/metrics" 2>/dev/null |
				awk '/^levee_requests_total[{ ]/ { n += $NF } END { printf "%d", n }')
			echo "pid=$levee port=$rport evalsha=${evalsha:-0} reads=${reads:-0} requests=${reqs:-0}" >>"$BENCH_RUN_DIR/redis-stats.log"
			sleep 2
		done
	) &
	wait "$levee"
	exit $?
fi
exec "$bin" run -config "$cfg"
