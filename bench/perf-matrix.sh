#!/usr/bin/env bash
# Every figure of issue 27's proxy comparison in one command, and issue
# 26's JWT-against-API-key figure: req/s, CPU per request and saturation
# p99 of each proxy in interleaved rounds (A B C A B C ...), as ratios
# against NGINX in the same run.
#
#   bench/perf-matrix.sh                       # everything, about 25 min
#   SIZES="64" ROUNDS=1 DURATION=5 bench/perf-matrix.sh   # a quick try
#   PARTS=jwt bench/perf-matrix.sh             # only the JWT/key pair
#
# Part "sizes", for each body size in SIZES (default "64 4096 65536"):
#   nginx, haproxy, caddy (those installed, the shared confs of
#   ../shared/bench/conf), levee (one path_prefix route, access log off, as
#   bench/levee-extra.sh) and levee-defended (the issue's "every defence
#   on": auth api_key with an app whose limits hold a rate limit, and
#   max_concurrency: adaptive on the upstream; the key sent by wrk).
# Part "jwt" (64-byte bodies): levee-key (auth api_key) against levee-jwt
#   (auth jwt, an RS256 token of an issuer whose JWKS a local file server
#   serves; the same token on every request, so a verification cache,
#   when levee has one, is warm). The CPU of a cold verification is
#   `go test -run '^$' -bench Verify ./internal/jwtauth` (RS256/cold,
#   ES256/cold), run at the end of this part.
#
# A run whose answers were not all 2xx (levee-defended's adaptive limit
# sheds when a saturated machine's latency rises) counts refusals in its
# req/s: the summary's non-2xx column says how many, and 2xx/s is the
# goodput (median of each round's req/s less its non-2xx share).
# Per proxy and round: start it, check a 200, warm up 2 s, wrk -t1 -c64
# -dDURATION --latency (saturation: req/s, p99), CPU = the proxy's
# utime+stime from /proc over the wrk run, divided by wrk's requests.
# Environment (defaults): SIZES="64 4096 65536" ROUNDS=3 DURATION=10
# CONNS=64 PARTS="sizes jwt" LEVEE_BIN=bin/levee SHARED_BENCH=../shared/bench
# PORT=18389 (uses PORT..PORT+9). Raw lines and the summary go to stdout;
# keep them as bench/results-<date>-<what>.txt. Every process it starts is
# stopped by its pid (process group).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_BENCH:-$here/../shared/bench}
[ -d "$shared" ] || shared=/work/shared/bench
SIZES=${SIZES:-"64 4096 65536"} ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-10} CONNS=${CONNS:-64}
PARTS=${PARTS:-"sizes jwt"}
levee=${LEVEE_BIN:-$here/bin/levee}
[ -x "$levee" ] || (cd "$here" && make -s build)
port=${PORT:-18389}
b1=$((port + 1)) b2=$((port + 2)) padmin=$((port + 3)) pjwks=$((port + 4))
dir=$(mktemp -d)
groups=()
stop_group() { kill -TERM -- "-$1" 2>/dev/null || true; for _ in $(seq 50); do kill -0 -- "-$1" 2>/dev/null || return 0; sleep 0.1; done; kill -KILL -- "-$1" 2>/dev/null || true; }
cleanup() { for g in "${groups[@]}"; do stop_group "$g"; done; rm -rf "$dir"; }
trap cleanup EXIT
start() { setsid "$@" >>"$dir/procs.log" 2>&1 & echo $!; }
hz=$(getconf CLK_TCK)
ticks() { # utime+stime of a process group's processes
  local t=0 p
  for p in $(pgrep -g "$1" || true); do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
  echo $t
}
wait200() { # $1 url, $2 header (may be empty)
  local i
  for i in $(seq 150); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' ${2:+-H "$2"} "$1" || true)" = 200 ] && return 0
    sleep 0.1
  done
  echo "no 200 from $1" >&2; return 1
}

# The backends for one size.
backend=${BENCH_BIN:-$shared/bin}/backend
if [ ! -x "$backend" ]; then
  backend=$dir/backend
  (cd "$shared" && GOTOOLCHAIN=local go build -o "$backend" ./backend)
fi
bg=()
start_backends() {
  for g in "${bg[@]}"; do stop_group "$g"; done
  bg=("$(start "$backend" -listen 127.0.0.1:$b1 -size "$1")" "$(start "$backend" -listen 127.0.0.1:$b2 -size "$1")")
  groups+=("${bg[@]}")
  wait200 "http://127.0.0.1:$b1/" ""
}

# The API key (and its SHA-256, as the config file holds it) and, for the
# JWT part, an RSA key, its JWKS and a token signed with it.
key=perfmatrix-0123456789abcdef0123456789abcdef
keysha=$(printf %s "$key" | sha256sum | awk '{print $1}')
b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }
jwt_setup() {
  mkdir -p "$dir/jwks"
  openssl genrsa -out "$dir/rsa.pem" 2048 2>/dev/null
  local n e now
  n=$(openssl rsa -in "$dir/rsa.pem" -noout -modulus | sed 's/^Modulus=//' | xxd -r -p | b64url)
  e=AQAB
  printf '{"keys":[{"kty":"RSA","kid":"k1","alg":"RS256","use":"sig","n":"%s","e":"%s"}]}' "$n" "$e" >"$dir/jwks/jwks.json"
  now=$(date +%s)
  local h p
  h=$(printf '{"alg":"RS256","kid":"k1","typ":"JWT"}' | b64url)
  p=$(printf '{"iss":"https://idp.perf.test/","aud":"bench","azp":"shop","sub":"u1","iat":%d,"exp":%d}' "$now" $((now + 86400)) | b64url)
  token="$h.$p.$(printf %s "$h.$p" | openssl dgst -sha256 -sign "$dir/rsa.pem" -binary | b64url)"
  groups+=("$(start python3 -m http.server "$pjwks" --bind 127.0.0.1 --directory "$dir/jwks")")
  wait200 "http://127.0.0.1:$pjwks/jwks.json" ""
}

# levee_config NAME writes the config of one levee variant.
levee_config() {
  local cfg=$dir/$1.yaml
  {
    echo "listen: 127.0.0.1:$port"
    echo "admin: {listen: 127.0.0.1:$padmin}"
    echo "state_dir: $dir/state-$1"
    echo "log: {level: warn, access: false}"
    echo "upstreams:"
    echo "  bench:"
    echo "    endpoints: [{address: 127.0.0.1:$b1, weight: 1}, {address: 127.0.0.1:$b2, weight: 1}]"
    [ "$1" = levee-defended ] && echo "    limits: {max_concurrency: adaptive}"
    echo "routes:"
    case $1 in
      levee) echo "  - {name: all, match: {path_prefix: /}, upstream: bench}" ;;
      levee-defended | levee-key) echo "  - {name: all, match: {path_prefix: /}, upstream: bench, auth: api_key}" ;;
      levee-jwt) echo "  - {name: all, match: {path_prefix: /}, upstream: bench, auth: jwt}" ;;
    esac
    echo "apps:"
    case $1 in
      levee-defended) echo "  - {id: shop, api_key_sha256: [$keysha], grants: [all], limits: {rate: 1000000000, burst: 1000000000}}" ;;
      *) echo "  - {id: shop, api_key_sha256: [$keysha], grants: [all]}" ;;
    esac
    if [ "$1" = levee-jwt ]; then
      echo "identity:"
      echo "  jwt_issuers:"
      echo "    perf: {issuer: 'https://idp.perf.test/', jwks_uri: 'http://127.0.0.1:$pjwks/jwks.json', audiences: [bench], algorithms: [RS256]}"
    fi
  } >"$cfg"
  echo "$cfg"
}

# run_one NAME SIZE ROUND: one measurement; prints one result line.
run_one() {
  local name=$1 size=$2 round=$3 url hdr="" g conf
  case $name in
    nginx)
      mkdir -p "$dir/nginx"
      sed -e "s/127.0.0.1:18081/127.0.0.1:$b1/; s/127.0.0.1:18082/127.0.0.1:$b2/; s/127.0.0.1:18083/127.0.0.1:$port/" \
        "$shared/conf/nginx.conf" >"$dir/nginx/nginx.conf"
      g=$(start nginx -p "$dir/nginx/" -e stderr -c "$dir/nginx/nginx.conf") ;;
    haproxy)
      sed -e "s/127.0.0.1:18081/127.0.0.1:$b1/; s/127.0.0.1:18082/127.0.0.1:$b2/; s/127.0.0.1:18084/127.0.0.1:$port/" \
        "$shared/conf/haproxy.cfg" >"$dir/haproxy.cfg"
      g=$(start haproxy -db -f "$dir/haproxy.cfg") ;;
    caddy)
      sed -e "s/127.0.0.1:18081/127.0.0.1:$b1/; s/127.0.0.1:18082/127.0.0.1:$b2/; s/127.0.0.1:18085/127.0.0.1:$port/" \
        "$shared/conf/Caddyfile" >"$dir/Caddyfile"
      g=$(XDG_CONFIG_HOME=$dir XDG_DATA_HOME=$dir start caddy run --adapter caddyfile --config "$dir/Caddyfile") ;;
    levee*)
      conf=$(levee_config "$name")
      g=$(start "$levee" run -config "$conf")
      case $name in
        levee-defended | levee-key) hdr="X-Api-Key: $key" ;;
        levee-jwt) hdr="Authorization: Bearer $token" ;;
      esac ;;
  esac
  groups+=("$g")
  url=http://127.0.0.1:$port/
  if ! wait200 "$url" "$hdr"; then stop_group "$g"; echo "$name size=$size round=$round FAILED to start"; return; fi
  timeout 20 wrk -t1 -c"$CONNS" -d2s ${hdr:+-H "$hdr"} "$url" >/dev/null || true
  local t0 t1 out reqs rps p99 non2xx
  t0=$(ticks "$g")
  out=$(timeout $((DURATION + 30)) wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency ${hdr:+-H "$hdr"} "$url" || true)
  t1=$(ticks "$g")
  stop_group "$g"
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
  echo "$name size=$size round=$round req/s=${rps:-0} requests=${reqs:-0} cpu_us_per_req=$(awk -v t=$((t1 - t0)) -v n="${reqs:-0}" -v hz="$hz" 'BEGIN{ if (n > 0) printf "%.1f", t*1e6/hz/n; else print "nan" }') p99=${p99:-?} non2xx=${non2xx:-0}"
}

# summary FILE BASE: medians per proxy and size, ratios against BASE.
summary() {
  awk -v base="$2" '
    function med(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t } return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2 }
    /round=/ && !/FAILED/ {
      split($0, f, " "); name = f[1]
      for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      k = name SUBSEP v["size"]; if (!(k in n)) { order[++no] = k }
      n[k]++; R[k, n[k]] = v["req/s"]; C[k, n[k]] = v["cpu_us_per_req"]; E[k] += v["non2xx"]; Q[k] += v["requests"]
      G[k, n[k]] = (v["requests"] > 0) ? v["req/s"] * (1 - v["non2xx"] / v["requests"]) : 0
      p = v["p99"]; P[k, n[k]] = (p ~ /us$/) ? p / 1000 : (p ~ /ms$/) ? p + 0 : (p + 0) * 1000
    }
    END {
      for (o = 1; o <= no; o++) { k = order[o]
        for (i = 1; i <= n[k]; i++) { a[i] = R[k, i] } mr[k] = med(a, n[k])
        for (i = 1; i <= n[k]; i++) { a[i] = C[k, i] } mc[k] = med(a, n[k])
        for (i = 1; i <= n[k]; i++) { a[i] = P[k, i] } mp[k] = med(a, n[k])
        for (i = 1; i <= n[k]; i++) { a[i] = G[k, i] } mg[k] = med(a, n[k]) }
      printf "%-16s %6s %10s %9s %12s %9s %10s %8s %8s %8s\n", "proxy", "size", "req/s", "x " base, "cpu us/req", "x " base, "p99 ms", "x " base, "non-2xx", "2xx/s"
      for (o = 1; o <= no; o++) { k = order[o]; split(k, ks, SUBSEP); b = base SUBSEP ks[2]
        printf "%-16s %6s %10.0f %9.2f %12.1f %9.2f %10.2f %8.2f %7.1f%% %8.0f\n", ks[1], ks[2], mr[k], (b in mr && mr[b] > 0) ? mr[k]/mr[b] : 0, mc[k], (b in mc && mc[b] > 0) ? mc[k]/mc[b] : 0, mp[k], (b in mp && mp[b] > 0) ? mp[k]/mp[b] : 0, (Q[k] > 0) ? 100 * E[k] / Q[k] : 0, mg[k] }
    }' "$1"
}

echo "perf-matrix: $(date -u +%FT%TZ) levee=$("$levee" version 2>/dev/null | head -1 || echo "$levee") load=$(cut -d' ' -f1-3 /proc/loadavg) rounds=$ROUNDS duration=${DURATION}s conns=$CONNS"
log=$dir/results.txt
: >"$log"
if [[ " $PARTS " == *" sizes "* ]]; then
  proxies="nginx"
  for p in haproxy caddy; do if command -v $p >/dev/null; then proxies="$proxies $p"; else echo "($p not installed: skipped)"; fi; done
  proxies="$proxies levee levee-defended"
  for size in $SIZES; do
    start_backends "$size"
    for round in $(seq "$ROUNDS"); do
      for p in $proxies; do run_one "$p" "$size" "$round" | tee -a "$log"; done
    done
  done
  echo "=== sizes: median of $ROUNDS rounds, ratios against nginx of the same size"
  summary "$log" nginx
fi
if [[ " $PARTS " == *" jwt "* ]]; then
  start_backends 64
  jwt_setup
  : >"$dir/jwt.txt"
  for round in $(seq "$ROUNDS"); do
    for p in levee-key levee-jwt; do run_one "$p" 64 "$round" | tee -a "$dir/jwt.txt"; done
  done
  echo "=== jwt: median of $ROUNDS rounds, ratios against levee-key (issue 26: levee-jwt req/s at least 0.9x)"
  summary "$dir/jwt.txt" levee-key
  echo "=== cold verification, CPU per token (no cache): go test -bench Verify ./internal/jwtauth"
  (cd "$here" && GOTOOLCHAIN=local go test -run '^$' -bench 'Verify' -benchmem -count 3 ./internal/jwtauth | grep -E '^Benchmark')
fi
