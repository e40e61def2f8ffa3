#!/usr/bin/env bash
# Plugs levee into ../shared/bench (proxy-compare.sh / overload.sh) as an
# --extra proxy: writes a levee config for $BENCH_LISTEN and $BENCH_UPSTREAMS
# into $BENCH_RUN_DIR, then execs levee (so levee leads the process group).
#   ../shared/bench/proxy-compare.sh --extra 'levee=exec bench/levee-extra.sh'
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
  echo "upstreams:"
  echo "  bench:"
  echo "    endpoints:"
  IFS=, read -ra ups <<<"$BENCH_UPSTREAMS"
  for u in "${ups[@]}"; do echo "      - {address: $u, weight: 1}"; done
  echo "routes:"
  echo "  - {name: all, match: {path_prefix: /}, upstream: bench}"
} >"$cfg"
exec "$bin" run -config "$cfg"
