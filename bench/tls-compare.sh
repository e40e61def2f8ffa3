#!/usr/bin/env bash
# Issue 24's and 27's TLS speed: levee vs NGINX, both fronting the same
# origin (an NGINX answering 64 bytes, clear on 18571 and TLS on 18572), in
# interleaved rounds (nginx, levee, nginx, levee, ...), median of ROUNDS:
#  (a) https-h1     HTTPS keep-alive HTTP/1.1 in (wrk -t1 -cCONNS https://),
#                   clear HTTP/1.1 to the origin;
#  (b) h2           HTTP/2 over TLS in (h2load -t1 -cH2_CONNS -mH2_STREAMS,
#                   Debian's nghttp2-client), clear HTTP/1.1 to the origin;
#  (c) upstream-tls clear HTTP/1.1 in (wrk -t1 -cCONNS http://), TLS to the
#                   origin: levee `upstreams.x.tls` (ca_file, server_name),
#                   NGINX proxy_pass https:// with proxy_ssl_verify on,
#                   both verifying the origin's certificate, both keeping
#                   upstream connections (and NGINX its TLS sessions).
# Per run: the front's req/s, its CPU per request (utime + stime of its
# process group, ../shared/bench/lib/common.sh's group_cpu_ticks, over the
# measured run), p99 latency at saturation (wrk --latency; h2load's
# per-request log), and the machine's CPU used by processes outside the
# run (other%, the noise). Summary: medians and levee/NGINX ratios.
# Targets: at least 0.8x NGINX's req/s (issue 24), 0.9x with TLS in (27).
#   ROUNDS=3 DURATION=10 bench/tls-compare.sh [a|b|c ...]
# LEVEE_B_BIN=PATH adds a second levee ("levee-b", same config) to every
# round, for a same-run A/B of a change (ratios levee-b/levee printed).
# PROFILE=DIR keeps a CPU profile of levee's measured run per scenario and
# round (its admin's /debug/pprof/profile; go tool pprof -top LEVEE FILE).
# Both fronts use two cores (NGINX 2 workers, levee GOMAXPROCS = 2 CPUs).
# Ports: PORT_BASE (18571) to PORT_BASE+3, and levee's admin at LEV+1000.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${LEVEE_BIN:-$here/bin/levee}
shared=${SHARED_BENCH:-/work/shared/bench}
# shellcheck source=/dev/null
. "$shared/lib/common.sh"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-64}
H2_CONNS=${H2_CONNS:-8}
H2_STREAMS=${H2_STREAMS:-8}
SIZE=${SIZE:-64}
scenarios=()
for s in "${@:-a b c}"; do
	for w in $s; do
		case $w in
		a | https-h1) scenarios+=(https-h1) ;;
		b | h2) scenarios+=(h2) ;;
		c | upstream-tls) scenarios+=(upstream-tls) ;;
		*) die "unknown scenario $w (a|b|c)" ;;
		esac
	done
done
need_cmd nginx wrk h2load openssl curl
[ -x "$bin" ] || (cd "$here" && make -s build)
base=${PORT_BASE:-18571}
ORIGIN=$base ORIGIN_TLS=$((base + 1)) NGX=$((base + 2)) LEV=$((base + 3))
require_free_ports $ORIGIN $ORIGIN_TLS $NGX $LEV $((LEV + 1000))
run=$(mktemp -d "${TMPDIR:-/tmp}/tls-compare.XXXXXX")
RUN_DIR=$run
install_traps
machine_info
say "levee $("$bin" version 2>/dev/null | head -1) | $(h2load --version 2>&1 | head -1) | run dir $run"

# A self-signed certificate for localhost and 127.0.0.1, used by the origin
# (TLS port) and by both fronts' TLS listeners.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
	-addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$run/key.pem" -out "$run/cert.pem" 2>/dev/null
body=$(head -c "$SIZE" /dev/zero | tr '\0' x)
common_http='worker_rlimit_nofile 16384; daemon off; master_process on; pid nginx.pid; error_log stderr error;
events { worker_connections 8192; }'
temps='client_body_temp_path t1; proxy_temp_path t2; fastcgi_temp_path t3; uwsgi_temp_path t4; scgi_temp_path t5;'
mkdir -p "$run/origin" "$run/nginx-https-h1" "$run/nginx-h2" "$run/nginx-upstream-tls" "$run/levee"
cat >"$run/origin/nginx.conf" <<EOF
worker_processes 1; $common_http
http { access_log off; $temps keepalive_requests 1000000; keepalive_timeout 75s; default_type text/plain;
  server { listen 127.0.0.1:$ORIGIN backlog=4096; listen 127.0.0.1:$ORIGIN_TLS ssl backlog=4096;
    ssl_certificate $run/cert.pem; ssl_certificate_key $run/key.pem;
    location / { return 200 "$body"; } } }
EOF
front() { # front SCENARIO: the NGINX front's config
	local listen upstream pass
	case $1 in
	upstream-tls)
		listen="listen 127.0.0.1:$NGX reuseport backlog=4096;"
		upstream="upstream o { server 127.0.0.1:$ORIGIN_TLS; keepalive 256; keepalive_requests 1000000; }"
		pass="proxy_pass https://o; proxy_ssl_verify on; proxy_ssl_trusted_certificate $run/cert.pem;
		  proxy_ssl_name localhost; proxy_ssl_server_name on; proxy_ssl_session_reuse on;" ;;
	*)
		listen="listen 127.0.0.1:$NGX ssl http2 reuseport backlog=4096;
		  ssl_certificate $run/cert.pem; ssl_certificate_key $run/key.pem;"
		upstream="upstream o { server 127.0.0.1:$ORIGIN; keepalive 256; keepalive_requests 1000000; }"
		pass="proxy_pass http://o;" ;;
	esac
	cat <<EOF
worker_processes 2; $common_http
http { access_log off; server_tokens off; tcp_nodelay on; $temps
  keepalive_timeout 75s; keepalive_requests 1000000;
  $upstream
  server { $listen
    location / { $pass proxy_http_version 1.1; proxy_set_header Connection ""; } } }
EOF
}
for s in https-h1 h2 upstream-tls; do front $s >"$run/nginx-$s/nginx.conf"; done
levee_conf() { # levee_conf SCENARIO
	echo "listen: 127.0.0.1:$LEV"
	echo "admin: {listen: 127.0.0.1:$((LEV + 1000))}"
	echo "state_dir: $run/levee/state"
	echo "log: {level: warn, access: false}"
	if [ "$1" = upstream-tls ]; then
		echo "upstreams:"
		echo "  o: {endpoints: [{address: 127.0.0.1:$ORIGIN_TLS}], tls: {ca_file: $run/cert.pem, server_name: localhost}}"
	else
		echo "tls: {cert_file: $run/cert.pem, key_file: $run/key.pem}"
		echo "upstreams:"
		echo "  o: {endpoints: [{address: 127.0.0.1:$ORIGIN}]}"
	fi
	echo "routes:"
	echo "  - {name: all, match: {path_prefix: /}, upstream: o}"
}
for s in https-h1 h2 upstream-tls; do levee_conf $s >"$run/levee/$s.yaml"; done

start_group "$run/origin.log" nginx -p "$run/origin/" -e stderr -c "$run/origin/nginx.conf"
og=$STARTED_PID
wait_port "$ORIGIN" 10 "$og" && wait_port "$ORIGIN_TLS" 10 "$og" || die "origin did not start: $(cat "$run/origin.log")"

# parse_h2load OUT LOG -> "rps p99_ms errors requests" (h2load's summary;
# p99 from its per-request log: start, status, duration in us).
parse_h2load() {
	local p99
	p99=$(awk '{print $3}' "$2" 2>/dev/null | sort -n | awk '{a[NR] = $1} END {i = int(NR * 0.99); if (i < 1) i = 1; if (NR) printf "%.3f", a[i] / 1000; else print "NA"}')
	awk -v p99="$p99" '
	/^finished in/ { gsub(/,/, ""); rps = $4 }
	/^requests:/ { gsub(/,/, ""); done = $8; failed = $10; errored = $12; timeout = $14 }
	/^status codes:/ { gsub(/,/, ""); non2xx = $5 + $7 + $9 }
	END { if (rps == "") { print "NA NA NA NA"; exit }
		printf "%.0f %s %d %d\n", rps, p99, failed + errored + timeout + non2xx, done }' "$1"
}

# start_profile: when $prof is set, a CPU profile of levee over the
# measured run (a second shorter), fetched in the background.
prof_pid=
start_profile() {
	prof_pid=
	[ -n "$prof" ] || return 0
	curl -s -m $((DURATION + 10)) -o "$prof" "http://127.0.0.1:$((LEV + 1000))/debug/pprof/profile?seconds=$((DURATION - 1))" &
	prof_pid=$!
}

fronts="nginx levee"
[ -z "${LEVEE_B_BIN:-}" ] || fronts="nginx levee levee-b"

declare -A RPS CPU P99
for sc in "${scenarios[@]}"; do
	echo
	say "=== $sc: $ROUNDS rounds of ${DURATION}s"
	for ((r = 1; r <= ROUNDS; r++)); do
		for p in $fronts; do
			case $p in
			nginx)
				start_group "$run/$p-$sc-r$r.log" nginx -p "$run/nginx-$sc/" -e stderr -c "$run/nginx-$sc/nginx.conf"
				port=$NGX ;;
			levee)
				start_group "$run/$p-$sc-r$r.log" "$bin" run -config "$run/levee/$sc.yaml"
				port=$LEV ;;
			levee-b)
				start_group "$run/$p-$sc-r$r.log" "$LEVEE_B_BIN" run -config "$run/levee/$sc.yaml"
				port=$LEV ;;
			esac
			pg=$STARTED_PID
			wait_port "$port" 30 "$pg" || die "$p did not start: $(cat "$run/$p-$sc-r$r.log")"
			out=$run/$p-$sc-r$r.txt
			prof=
			if [ -n "${PROFILE:-}" ] && [ $p != nginx ]; then
				mkdir -p "$PROFILE"
				prof=$PROFILE/$p-$sc-r$r.pprof
			fi
			case $sc in
			https-h1 | upstream-tls)
				scheme=https
				[ $sc = upstream-tls ] && scheme=http
				url=$scheme://127.0.0.1:$port/
				got=$(curl -sk -m 5 "$url") || true
				[ "$got" = "$body" ] || die "$p ($sc): GET $url answered '${got:0:80}', want the origin's $SIZE bytes"
				run_bounded $((WARMUP + 20)) /dev/null wrk -t1 -c"$CONNS" -d"${WARMUP}s" "$url"
				measure_begin "$pg" "$og"
				start_profile
				run_bounded $((DURATION + 20)) "$out" wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "$url"
				measure_end "$pg" "$og"
				read -r rps _ p99 errs reqs < <(parse_wrk "$out")
				;;
			h2)
				url=https://127.0.0.1:$port/
				run_bounded 20 "$out.check" h2load -n1 -c1 "$url"
				grep -q '^status codes: 1 2xx' "$out.check" || die "$p (h2): h2load -n1 did not get a 2xx: $(cat "$out.check")"
				grep -q 'Application protocol: h2' "$out.check" || die "$p (h2): not h2 over TLS: $(cat "$out.check")"
				run_bounded $((WARMUP + 20)) /dev/null h2load -t1 -c"$H2_CONNS" -m"$H2_STREAMS" -D "$WARMUP" "$url"
				measure_begin "$pg" "$og"
				start_profile
				run_bounded $((DURATION + 20)) "$out" h2load -t1 -c"$H2_CONNS" -m"$H2_STREAMS" -D "$DURATION" --log-file="$out.log" "$url"
				measure_end "$pg" "$og"
				read -r rps p99 errs reqs < <(parse_h2load "$out" "$out.log")
				rm -f "$out.log"
				;;
			esac
			[ -z "$prof_pid" ] || wait "$prof_pid" || true
			stop_group "$pg"
			wait_port_free "$port" 10 || true
			us=$(awk -v d="$M_PROXY_TICKS" -v hz="$CLK_TCK" -v n="$reqs" 'BEGIN{if (n+0>0) printf "%.1f", 1e6*d/hz/n; else print "NA"}')
			say "round $r $sc $p: $rps req/s, p99 ${p99} ms, errors $errs, CPU ${us} us/req, machine busy ${M_BUSY}% (outside the run ${M_OTHER}%)"
			sed 's/^/| /' "$out"
			[ "${errs:-NA}" = 0 ] || say "WARNING: $p ($sc) had $errs errors in round $r"
			RPS[$sc.$p]+="$rps "
			CPU[$sc.$p]+="$us "
			P99[$sc.$p]+="$p99 "
		done
	done
done
stop_group "$og"

med() { tr ' ' '\n' <<<"$1" | grep -v '^$' | median; }
echo
say "=== summary: median of $ROUNDS rounds, ${SIZE}-byte answers; CONNS=$CONNS (wrk), h2load -c$H2_CONNS -m$H2_STREAMS"
printf '%-13s %-6s %10s %12s %10s %12s %12s\n' scenario front "req/s" "CPU us/req" "p99 ms" "req/s ratio" "CPU ratio"
for sc in "${scenarios[@]}"; do
	nr=$(med "${RPS[$sc.nginx]}") nc=$(med "${CPU[$sc.nginx]}") np=$(med "${P99[$sc.nginx]}")
	lr=$(med "${RPS[$sc.levee]}") lc=$(med "${CPU[$sc.levee]}") lp=$(med "${P99[$sc.levee]}")
	printf '%-13s %-6s %10s %12s %10s\n' "$sc" nginx "$nr" "$nc" "$np"
	awk -v sc="$sc" -v lr="$lr" -v lc="$lc" -v lp="$lp" -v nr="$nr" -v nc="$nc" 'BEGIN {
		rr = (nr > 0) ? sprintf("%.2fx", lr / nr) : "NA"; cr = (nc > 0) ? sprintf("%.2fx", lc / nc) : "NA"
		printf "%-13s %-6s %10s %12s %10s %12s %12s\n", sc, "levee", lr, lc, lp, rr, cr }'
	[ -n "${LEVEE_B_BIN:-}" ] || continue
	awk -v sc="$sc" -v br="$(med "${RPS[$sc.levee-b]}")" -v bc="$(med "${CPU[$sc.levee-b]}")" -v bp="$(med "${P99[$sc.levee-b]}")" \
		-v lr="$lr" -v lc="$lc" -v nr="$nr" -v nc="$nc" 'BEGIN {
		rr = (nr > 0) ? sprintf("%.2fx", br / nr) : "NA"; cr = (nc > 0) ? sprintf("%.2fx", bc / nc) : "NA"
		printf "%-13s %-6s %10s %12s %10s %12s %12s\n", sc, "lev-b", br, bc, bp, rr, cr
		if (lr > 0 && lc > 0) printf "%-13s levee-b / levee: %.2fx req/s, %.2fx CPU per request\n", sc, br / lr, bc / lc }'
done
