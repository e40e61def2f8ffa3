#!/usr/bin/env bash
# overload-lean.sh: ../shared/bench/overload.sh's setup with a lean load
# generator. Same backend (../shared/bench's, CAPACITY at a time, SERVICE_MS
# each, an unbounded queue behind), same NGINX and HAProxy configs (theirs,
# rendered the same way), levee through bench/levee-extra.sh; the client is
# bench/leanload (internal/loadgen) instead of a net/http client.
#
# Why: on these 2-core machines the shared loadgen's net/http client needs
# more CPU per request than the proxies do, so at 10x (10,000 requests/s) it
# saturates the machine by itself, and every proxy is then measured by how
# much CPU it leaves the client (docs/admission.md, "The client, not the
# host"). With this client NGINX reproduces the figures the issue
# quotes for a quiet machine.
#
#   bench/overload-lean.sh                      # open loop, 1x 3x 10x, 4 configs
#   MODE=closed LEVELS=10 ROUNDS=3 bench/overload-lean.sh
#
# Environment (defaults): CONFIGS ("nginx-limit haproxy-queue levee-adaptive
# levee-static"), MODE (open: LEVEL x nominal requests/s, at most 512 in
# flight; closed: LEVEL x CAPACITY clients without backoff), LEVELS ("1 3
# 10"), CAPACITY (20), SERVICE_MS (20), DURATION (10 s per level), ROUNDS
# (1; the configs are interleaved round by round), QUEUE_TIMEOUT (50ms,
# HAProxy's queue), CLIENT_TIMEOUT (2s).
# Ports 18183 (NGINX), 18184 (HAProxy), 18188 (backend), 18189 and 19189
# (levee): apart from the shared bench's, so both never collide. Every
# process is started in a session of its own and stopped by it.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
shared=${BENCH_DIR:-$here/../shared/bench}
CONFIGS=${CONFIGS:-"nginx-limit haproxy-queue levee-adaptive levee-static"}
MODE=${MODE:-open} LEVELS=${LEVELS:-"1 3 10"} CAPACITY=${CAPACITY:-20} SERVICE_MS=${SERVICE_MS:-20}
DURATION=${DURATION:-10} ROUNDS=${ROUNDS:-1} QUEUE_TIMEOUT=${QUEUE_TIMEOUT:-50ms} CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-2s}
for v in CAPACITY SERVICE_MS DURATION ROUNDS; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v must be a positive integer" >&2; exit 2; }
done
[ "$MODE" = open ] || [ "$MODE" = closed ] || { echo "MODE must be open or closed" >&2; exit 2; }
nominal=$((CAPACITY * 1000 / SERVICE_MS))
backend=127.0.0.1:18188
for p in 18183 18184 18188 18189 19189; do
	if ss -Hltn "sport = :$p" | grep -q .; then echo "port $p is taken" >&2; exit 2; fi
done

dir=$(mktemp -d)
sids=()
cleanup() {
	for s in "${sids[@]}"; do kill -- "-$s" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
say() { echo "[$(date +%T)] $*"; }

# Tools: the shared backend (built if its bin/ has none), leanload, levee.
bin=${BENCH_BIN:-$shared/bin}
if [ ! -x "$bin/backend" ]; then
	(cd "$shared" && go build -o "$dir/backend" ./backend)
	bin=$dir
fi
(cd "$here" && go build -o "$dir/leanload" ./bench/leanload)
[ -x "$here/bin/levee" ] || (cd "$here" && make -s build)

# start LOG CMD...: runs CMD in a session of its own; sets sid.
start() {
	local log=$1
	shift
	setsid "$@" >"$log" 2>&1 &
	sid=$!
	sids+=("$sid")
}
stop() {
	kill -- "-$1" 2>/dev/null || true
	local i
	for ((i = 0; i < 50; i++)); do ps -o pid= --sid "$1" >/dev/null 2>&1 || return 0; sleep 0.1; done
	kill -9 -- "-$1" 2>/dev/null || true
}
# wait_port PORT: up to 10 s for a listener.
wait_port() {
	local i
	for ((i = 0; i < 100; i++)); do ss -Hltn "sport = :$1" | grep -q . && return 0; sleep 0.1; done
	echo "nothing listens on $1" >&2
	return 1
}
ticks() { # user+system ticks of a session's processes
	local p sum=0 t
	for p in $(ps -o pid= --sid "$1" 2>/dev/null); do
		t=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13}') || t=0
		sum=$((sum + ${t:-0}))
	done
	echo "$sum"
}
cpu_stat() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6}' /proc/stat; }
hz=$(getconf CLK_TCK)

start "$dir/backend.log" "$bin/backend" -listen "$backend" -sleep "${SERVICE_MS}ms" -capacity "$CAPACITY"
wait_port 18188
say "backend: $CAPACITY at a time x ${SERVICE_MS}ms = nominal $nominal req/s; mode $MODE; ${DURATION}s per level; rounds $ROUNDS"

render() { sed -e "s/@CAPACITY@/$CAPACITY/g" -e "s/@QUEUE_TIMEOUT@/$QUEUE_TIMEOUT/g" -e "s/@BACKEND@/$backend/g" -e "s/$2/$3/g" "$1"; }

# launch CONFIG: starts the proxy; sets sid and port.
launch() {
	case $1 in
	nginx-limit)
		mkdir -p "$dir/nginx"
		render "$shared/conf/nginx-overload-limit.conf" 127.0.0.1:18083 127.0.0.1:18183 >"$dir/nginx.conf"
		start "$dir/$1.log" nginx -p "$dir/nginx/" -e stderr -c "$dir/nginx.conf"
		port=18183 ;;
	haproxy-queue)
		render "$shared/conf/haproxy-overload-queue.cfg" 127.0.0.1:18084 127.0.0.1:18184 >"$dir/haproxy.cfg"
		start "$dir/$1.log" haproxy -db -f "$dir/haproxy.cfg"
		port=18184 ;;
	levee-adaptive | levee-static)
		mkdir -p "$dir/$1"
		start "$dir/$1.log" env BENCH_LISTEN=127.0.0.1:18189 BENCH_UPSTREAMS="$backend" BENCH_RUN_DIR="$dir/$1" \
			BENCH_MODE=overload BENCH_CAPACITY="$CAPACITY" LEVEE_LIMIT="${1#levee-}" "$here/bench/levee-extra.sh"
		port=18189 ;;
	*) echo "unknown config $1" >&2; exit 2 ;;
	esac
	wait_port "$port"
}

results=$dir/results.tsv
for ((round = 1; round <= ROUNDS; round++)); do
	for c in $CONFIGS; do
		launch "$c"
		"$dir/leanload" -addr "127.0.0.1:$port" -c "$CAPACITY" -d 2s >/dev/null # warm up, as the shared bench does
		for lvl in $LEVELS; do
			if [ "$MODE" = open ]; then args=(-rate $((lvl * nominal)) -c 512); else args=(-c $((lvl * CAPACITY))); fi
			t0=$(ticks "$sid") s0=$(cpu_stat)
			out=$(timeout $((DURATION + 30)) "$dir/leanload" -addr "127.0.0.1:$port" "${args[@]}" -d "${DURATION}s" \
				-timeout "$CLIENT_TIMEOUT" -label "$c/${lvl}x")
			t1=$(ticks "$sid") s1=$(cpu_stat)
			cpu=$((100 * (t1 - t0) / hz / DURATION))
			busy=$(echo "$s0 $s1" | awk '{b = $3 - $1; i = $4 - $2; printf "%d", (b + i > 0) ? 100 * b / (b + i) : 0}')
			say "$c ${lvl}x: $out proxy_cpu=${cpu}% machine_busy=${busy}%"
			echo "$out" | awk -v c="$c" -v l="$lvl" -v r="$round" -v cpu="$cpu" -v busy="$busy" -v nom="$nominal" '
				{ for (i = 2; i <= NF; i++) { j = index($i, "="); k[substr($i, 1, j - 1)] = substr($i, j + 1) } }
				END { printf "%s\t%s\t%s\t%s\t%.0f%%\t%s\t%s\t%s\t%s\t%s\t%s%%\t%s%%\n", c, l "x", r, k["goodput"], 100 * k["goodput"] / nom,
					k["ok_p50_ms"], k["ok_p99_ms"], k["nok_p50_ms"], k["err_timeout"] + k["err_other"], k["reasons"], cpu, busy }' >>"$results"
			sleep 1 # let abandoned requests drain from the backend's queue
		done
		stop "$sid"
	done
done
say "=== summary ($MODE loop, lean client; nominal $nominal req/s = $CAPACITY x ${SERVICE_MS}ms)"
{
	printf "config\tload\tround\tgoodput/s\t%%nom\tok_p50_ms\tok_p99_ms\trej_p50_ms\tfailed\trefusals\tproxy_cpu\tbusy\n"
	sort -t $'\t' -k2,2V -k1,1 -k3,3n "$results"
} | column -t -s $'\t'
