#!/usr/bin/env bash
# A soak of levee (issue 28.5): mixed HTTP (a file-discovered upstream whose
# registry file is rewritten every 5 s), data-API (PostgreSQL 15, a throwaway
# cluster on loopback, restarted once at half time) and WebSocket traffic
# (8 held connections, each echoing a message every 200 ms and reconnecting
# every 2 minutes), with a reload every 10 s (POST /api/v1/reload after a
# header change in the file). Every minute: levee's goroutines (pprof),
# open files (/proc/PID/fd), RSS (VmRSS) and the errors of the minute; at
# the end a verdict against the bounds bench/soak/main.go states
# (goroutines +50 plus 20%, open files +32, RSS +64 MiB from minute 2 to the
# end; no HTTP or WebSocket error, no failed reload, data errors only while
# PostgreSQL is down plus 10 s, at most 5% of data requests shed by
# admission on a busy machine). Exit status 0 when it holds.
#   DURATION=30m bench/soak.sh | tee bench/results-DATE-soak.txt
# Also: HTTP_RATE (100/s), DATA_RATE (5/s), WS (8), EVERY (1m),
# RELOAD (10s), CHURN (5s), LEVEE_BIN (default: bin/levee, built if missing),
# LEVEE_PG_BINDIR (/usr/lib/postgresql/15/bin).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export GOTOOLCHAIN=${GOTOOLCHAIN:-local} GOFLAGS=${GOFLAGS:--buildvcs=false}
bin=${LEVEE_BIN:-$here/bin/levee}
[ -x "$bin" ] || make -s build
soak=$(mktemp -d)/soak
trap 'rm -rf "$(dirname "$soak")"' EXIT
go build -o "$soak" ./bench/soak
echo "# bench/soak.sh $(date -u +%FT%TZ) levee $("$bin" version 2>/dev/null | head -1) on $(nproc) cores ($(uname -r))"
"$soak" -levee "$bin" -d "${DURATION:-30m}" -every "${EVERY:-1m}" -reload "${RELOAD:-10s}" \
  -churn "${CHURN:-5s}" -http-rate "${HTTP_RATE:-100}" -data-rate "${DATA_RATE:-5}" -ws "${WS:-8}" \
  -pg "${LEVEE_PG_BINDIR:-/usr/lib/postgresql/15/bin}"
