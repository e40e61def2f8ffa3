#!/usr/bin/env bash
# Issue 25's "Speed": what route features cost, on ../shared/bench's setup.
#  (a)/(b) proxy-compare.sh, interleaved rounds in one run, of levee on a
#      plain route ("plain", bench/levee-extra.sh) and levee on a route with
#      a header match, a path_regex rewrite and two header changes
#      ("features", this script as an --extra); NGINX alongside as the
#      anchor. Reports req/s, CPU per request and features/plain.
#  (c) gzip of a 64 KiB JSON answer: levee `compression` (gzip, level fast =
#      gzip level 1) and NGINX `gzip on` (gzip_comp_level 1), both proxying
#      the same origin (an NGINX serving a static JSON file), wrk with
#      Accept-Encoding: gzip, the proxy's CPU per request, ROUNDS rounds
#      interleaved.
#   ROUNDS=3 bench/route-features.sh
# When BENCH_LISTEN is set (proxy-compare's --extra), it writes the
# "features" levee config instead and execs levee.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${LEVEE_BIN:-$here/bin/levee}
shared=${SHARED_BENCH:-/work/shared/bench}

if [ -n "${BENCH_LISTEN:-}" ]; then # --extra mode: the features route
	port=${BENCH_LISTEN##*:}
	cfg=$BENCH_RUN_DIR/levee.yaml
	{
		echo "listen: $BENCH_LISTEN"
		echo "admin: {listen: 127.0.0.1:$((port + 1000))}"
		echo "state_dir: $BENCH_RUN_DIR/levee-state"
		echo "log: {level: warn, access: false}"
		echo "upstreams:"
		echo "  bench:"
		echo "    endpoints:"
		IFS=, read -ra ups <<<"$BENCH_UPSTREAMS"
		for u in "${ups[@]}"; do echo "      - {address: $u, weight: 1}"; done
		cat <<'YAML'
routes:
  - name: canary
    match: {path_prefix: /, headers: [{name: X-Canary, exact: "1"}]}
    upstream: bench
  - name: all
    match: {path_prefix: /, headers: [{name: X-Canary, absent: true}]}
    upstream: bench
    rewrite: {path_regex: {pattern: "^/(.*)$", substitution: "/v2/$1"}}
    headers:
      request: {set: {X-Env: bench}, remove: [X-Debug]}
YAML
	} >"$cfg"
	exec "$bin" run -config "$cfg"
fi

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-64}
[ -x "$bin" ] || (cd "$here" && make -s build)
cd "$here"

echo "=== (a)/(b) plain route vs header match + rewrite + two header changes (proxy-compare, $ROUNDS rounds)"
"$shared/proxy-compare.sh" --rounds "$ROUNDS" --proxies nginx \
	--extra "plain=exec $here/bench/levee-extra.sh" \
	--extra "features=exec $here/bench/route-features.sh" | tee /tmp/route-features-compare.$$.txt
awk '$1 == "plain" || $1 == "features" {rps[$1] = $2; us[$1] = $7}
	END { if (rps["plain"] > 0) printf "features/plain: %.3fx req/s; CPU per request %s vs %s us\n", rps["features"] / rps["plain"], us["features"], us["plain"] }' \
	/tmp/route-features-compare.$$.txt
rm -f /tmp/route-features-compare.$$.txt

echo
echo "=== (c) gzip of a 64 KiB JSON answer: levee compression vs NGINX gzip on, level 1 ($ROUNDS rounds)"
# shellcheck source=/dev/null
. "$shared/lib/common.sh"
run=$(mktemp -d "${TMPDIR:-/tmp}/route-features.XXXXXX")
install_traps 2>/dev/null || trap 'cleanup_all' EXIT
ORIGIN=18091 NGX=18092 LEV=18093
mkdir -p "$run/origin/www" "$run/front" "$run/levee"
python3 - "$run/origin/www/a.json" <<'PY'
import json, random, sys
random.seed(7)
rows, s = [], ""
while len(s) < 65536:
    rows.append({"id": len(rows), "name": "item-%d" % random.randrange(10**6), "price": round(random.random() * 1000, 2),
                 "tags": random.sample(["red", "green", "blue", "small", "large", "sale", "new"], 3), "stock": random.randrange(500)})
    s = json.dumps(rows)
open(sys.argv[1], "w").write(s[:65536 - 1].rsplit(",{", 1)[0] + "]")
PY
common_http='worker_processes 1; daemon off; master_process off; pid nginx.pid; error_log stderr error;
events { worker_connections 4096; }'
temps='client_body_temp_path t1; proxy_temp_path t2; fastcgi_temp_path t3; uwsgi_temp_path t4; scgi_temp_path t5;'
cat >"$run/origin/nginx.conf" <<EOF2
$common_http
http { access_log off; $temps keepalive_requests 1000000; default_type application/json;
  server { listen 127.0.0.1:$ORIGIN; root www; location / { try_files /a.json =404; } } }
EOF2
cat >"$run/front/nginx.conf" <<EOF2
$common_http
http { access_log off; $temps keepalive_requests 1000000;
  upstream o { server 127.0.0.1:$ORIGIN; keepalive 64; }
  server { listen 127.0.0.1:$NGX; gzip on; gzip_comp_level 1; gzip_types application/json; gzip_proxied any; gzip_min_length 1024;
    location / { proxy_pass http://o; proxy_http_version 1.1; proxy_set_header Connection ""; } } }
EOF2
cat >"$run/levee/levee.yaml" <<EOF2
listen: 127.0.0.1:$LEV
admin: {listen: 127.0.0.1:$((LEV + 1000))}
state_dir: $run/levee/state
log: {level: warn, access: false}
upstreams:
  origin: {endpoints: [{address: 127.0.0.1:$ORIGIN}]}
routes:
  - name: all
    upstream: origin
    compression: {encodings: [gzip], level: fast, types: [application/json]}
EOF2
start_group "$run/origin.log" nginx -p "$run/origin/" -e stderr -c "$run/origin/nginx.conf"
og=$STARTED_PID
wait_port "$ORIGIN" 10 "$og" || die "origin did not start: $(cat "$run/origin.log")"
declare -A CPU RPS SIZE
for ((r = 1; r <= ROUNDS; r++)); do
	for p in nginx-gzip levee-gzip; do
		if [ "$p" = nginx-gzip ]; then
			start_group "$run/$p.log" nginx -p "$run/front/" -e stderr -c "$run/front/nginx.conf"
			port=$NGX
		else
			start_group "$run/$p.log" "$bin" run -config "$run/levee/levee.yaml"
			port=$LEV
		fi
		pg=$STARTED_PID
		wait_port "$port" 30 "$pg" || die "$p did not start: $(cat "$run/$p.log")"
		size=$(curl -s -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/a.json" | wc -c)
		enc=$(curl -s -o /dev/null -D - -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/a.json" | tr -d '\r' | awk -F': ' 'tolower($1)=="content-encoding"{print $2}')
		run_bounded 20 /dev/null wrk -t1 -c"$CONNS" -d2s -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/a.json"
		t0=$(group_cpu_ticks "$pg")
		run_bounded $((DURATION + 20)) "$run/$p-r$r.txt" wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/a.json"
		t1=$(group_cpu_ticks "$pg")
		stop_group "$pg"
		wait_port_free "$port" 10 || true
		read -r rps _ _ errs reqs < <(parse_wrk "$run/$p-r$r.txt")
		us=$(awk -v d=$((t1 - t0)) -v hz="$CLK_TCK" -v n="$reqs" 'BEGIN{if (n+0>0) printf "%.1f", 1e6*d/hz/n; else print "NA"}')
		say "round $r $p: $rps req/s, errors $errs, proxy CPU ${us}us/req, answer $size bytes ($enc)"
		CPU[$p]+="$us "
		RPS[$p]+="$rps "
		SIZE[$p]=$size
	done
done
stop_group "$og"
echo
say "=== summary (c): median of $ROUNDS rounds, 64 KiB JSON ($(wc -c <"$run/origin/www/a.json") bytes), gzip level 1"
for p in nginx-gzip levee-gzip; do
	m_us=$(tr ' ' '\n' <<<"${CPU[$p]}" | grep -v '^$' | median)
	m_rps=$(tr ' ' '\n' <<<"${RPS[$p]}" | grep -v '^$' | median)
	printf '%-11s %9s req/s %8s us/req CPU  gzip answer %s bytes\n' "$p" "$m_rps" "$m_us" "${SIZE[$p]}"
	eval "M_$(tr - _ <<<"$p")=$m_us"
done
awk -v l="$M_levee_gzip" -v n="$M_nginx_gzip" 'BEGIN{ if (n > 0) printf "levee/nginx CPU per request: %.2fx\n", l / n }'
rm -rf "$run"
