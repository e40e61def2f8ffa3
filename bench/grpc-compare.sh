#!/usr/bin/env bash
# Issue 24's gRPC speed: gRPC unary calls (grpc.testing.TestService/
# UnaryCall, SIZE-byte request and answer) from bench/grpcload's closed-loop
# generator (STREAMS concurrent callers over CONNS HTTP/2 connections, h2c)
# to a grpc-go backend (bench/grpcload serve, on PORT_BASE, default 18581;
# NGINX on +2, levee on +3 and its admin on +1003):
#   direct   straight at the backend (the harness's limit on this machine);
#   nginx    NGINX `grpc_pass` (h2c listener `listen ... http2`, h2c to the
#            backend, upstream keepalive);
#   levee    levee's clear listener (h2c) and `protocol: h2c` upstream.
# Interleaved rounds (direct, nginx, levee, direct, ...), median of ROUNDS.
# Per run: calls/s, errors, p50/p99, and the front's CPU per call (utime +
# stime of its process group, ../shared/bench/lib/common.sh). Target:
# levee at least 0.8x NGINX's calls/s (issue 24).
#   ROUNDS=3 DURATION=10 bench/grpc-compare.sh
# gRPC through levee needs the grpc helper's work (trailers passed through,
# session 27): before it, levee's column shows every call failed
# ("server closed the stream without sending trailers").
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${LEVEE_BIN:-$here/bin/levee}
shared=${SHARED_BENCH:-/work/shared/bench}
# shellcheck source=/dev/null
. "$shared/lib/common.sh"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-4}
STREAMS=${STREAMS:-64}
SIZE=${SIZE:-64}
FRONTS=${FRONTS:-"direct nginx levee"}
need_cmd nginx go
[ -x "$bin" ] || (cd "$here" && make -s build)
base=${PORT_BASE:-18581}
BACKEND=$base NGX=$((base + 2)) LEV=$((base + 3))
require_free_ports $BACKEND $NGX $LEV $((LEV + 1000))
run=$(mktemp -d "${TMPDIR:-/tmp}/grpc-compare.XXXXXX")
RUN_DIR=$run
install_traps
machine_info
say "building bench/grpcload"
(cd "$here" && GOFLAGS=-buildvcs=false go build -o "$run/grpcload" ./bench/grpcload) || die "go build ./bench/grpcload failed"
say "levee $("$bin" version 2>/dev/null | head -1) | run dir $run"

mkdir -p "$run/nginx" "$run/levee"
cat >"$run/nginx/nginx.conf" <<EOF
worker_processes 2; worker_rlimit_nofile 16384; daemon off; master_process on; pid nginx.pid; error_log stderr error;
events { worker_connections 8192; }
http { access_log off; server_tokens off; tcp_nodelay on;
  client_body_temp_path t1; proxy_temp_path t2; fastcgi_temp_path t3; uwsgi_temp_path t4; scgi_temp_path t5;
  keepalive_timeout 75s; keepalive_requests 1000000; http2_max_requests 1000000;
  upstream g { server 127.0.0.1:$BACKEND; keepalive 64; keepalive_requests 1000000; }
  server { listen 127.0.0.1:$NGX http2 reuseport backlog=4096;
    location / { grpc_pass grpc://g; } } }
EOF
cat >"$run/levee/levee.yaml" <<EOF
listen: 127.0.0.1:$LEV
admin: {listen: 127.0.0.1:$((LEV + 1000))}
state_dir: $run/levee/state
log: {level: warn, access: false}
upstreams:
  g: {protocol: h2c, endpoints: [{address: 127.0.0.1:$BACKEND}]}
routes:
  - {name: all, match: {path_prefix: /}, upstream: g}
EOF

start_group "$run/backend.log" "$run/grpcload" serve -listen "127.0.0.1:$BACKEND"
bg=$STARTED_PID
wait_port "$BACKEND" 10 "$bg" || die "backend did not start: $(cat "$run/backend.log")"

declare -A RPS CPU P99 P50
for ((r = 1; r <= ROUNDS; r++)); do
	for p in $FRONTS; do
		pg=
		case $p in
		direct) port=$BACKEND ;;
		nginx)
			start_group "$run/$p-r$r.log" nginx -p "$run/nginx/" -e stderr -c "$run/nginx/nginx.conf"
			pg=$STARTED_PID port=$NGX ;;
		levee)
			start_group "$run/$p-r$r.log" "$bin" run -config "$run/levee/levee.yaml"
			pg=$STARTED_PID port=$LEV ;;
		*) die "unknown front $p" ;;
		esac
		[ -z "$pg" ] || wait_port "$port" 30 "$pg" || die "$p did not start: $(cat "$run/$p-r$r.log")"
		out=$run/$p-r$r.txt
		# The generator's warm-up is not counted; the CPU bracket holds
		# it too (measure_begin before the process starts), so CPU per
		# call is taken over warm-up and measured calls alike: the
		# generator prints both counts (RESULT requests= is the measured
		# part; warm-up calls are in warm=).
		measure_begin "${pg:-$bg}" "$bg"
		run_bounded $((WARMUP + DURATION + 30)) "$out" "$run/grpcload" load -target "127.0.0.1:$port" \
			-conns "$CONNS" -streams "$STREAMS" -size "$SIZE" -warmup "${WARMUP}s" -d "${DURATION}s" -label "$p"
		measure_end "${pg:-$bg}" "$bg"
		[ -z "$pg" ] || stop_group "$pg"
		[ -z "$pg" ] || wait_port_free "$port" 10 || true
		line=$(grep '^RESULT' "$out" || echo "RESULT rps=NA requests=0 errors=NA p50_ms=NA p99_ms=NA")
		kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
		rps=$(kv rps) reqs=$(kv requests) all=$(kv calls) errs=$(kv errors) p50=$(kv p50_ms) p99=$(kv p99_ms)
		us=NA
		[ -z "$pg" ] || us=$(awk -v d="$M_PROXY_TICKS" -v hz="$CLK_TCK" -v n="$all" 'BEGIN{if (n+0>0) printf "%.1f", 1e6*d/hz/n; else print "NA"}')
		say "round $r $p: $rps calls/s, p50 $p50 ms, p99 $p99 ms, errors $errs, front CPU ${us} us/call, machine busy ${M_BUSY}% (outside the run ${M_OTHER}%)"
		sed 's/^/| /' "$out"
		RPS[$p]+="$rps " CPU[$p]+="$us " P99[$p]+="$p99 " P50[$p]+="$p50 "
	done
done
stop_group "$bg"

med() { tr ' ' '\n' <<<"$1" | grep -v '^$' | median; }
echo
say "=== summary: median of $ROUNDS rounds, gRPC unary, $SIZE-byte messages, $STREAMS callers over $CONNS connections"
nr=$(med "${RPS[nginx]:-}") nc=$(med "${CPU[nginx]:-}")
printf '%-7s %10s %12s %9s %9s %12s %12s\n' front "calls/s" "CPU us/call" "p50 ms" "p99 ms" "vs nginx" "CPU vs nginx"
for p in $FRONTS; do
	awk -v p="$p" -v r="$(med "${RPS[$p]}")" -v c="$(med "${CPU[$p]}")" -v p50="$(med "${P50[$p]}")" -v p99="$(med "${P99[$p]}")" -v nr="$nr" -v nc="$nc" 'BEGIN {
		rr = (nr > 0 && r != "NA") ? sprintf("%.2fx", r / nr) : "NA"; cr = (nc > 0 && c != "NA") ? sprintf("%.2fx", c / nc) : "NA"
		printf "%-7s %10s %12s %9s %9s %12s %12s\n", p, r, c, p50, p99, rr, cr }'
done
