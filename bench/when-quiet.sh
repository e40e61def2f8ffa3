#!/usr/bin/env bash
# Runs a shared benchmark only once the host is quiet enough to judge it.
# These 2-core machines share their host; on a busy day the same NGINX run
# costs up to twice the CPU, and at 10x overload the load generator and any
# proxy then saturate both cores, so the figures say nothing about the
# proxy. This polls with a 5 s NGINX run at 10x (20 x 20 ms) and starts the
# command once NGINX's CPU stayed at or below QUIET_CPU percent (default 30;
# it was 24 on a quiet day) for two probes in a row.
#   bench/when-quiet.sh MODE=open CAPACITY=20 SERVICE_MS=20 ../shared/bench/overload.sh ...
# Environment: QUIET_CPU (30), PROBES (most probes, 100), PAUSE (s between
# probes, 60). While the file $PAUSE_FILE (default /tmp/when-quiet.pause)
# exists, probing is suspended (so other work does not disturb it). Exits 3
# if the host never got quiet.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 [VAR=value ...] command [args ...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
bench=${BENCH_DIR:-$here/../shared/bench}
quiet_cpu=${QUIET_CPU:-30} probes=${PROBES:-100} pause=${PAUSE:-60}
pause_file=${PAUSE_FILE:-/tmp/when-quiet.pause}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
streak=0
for ((i = 1; i <= probes; i++)); do
	# A paused spell does not count against PROBES.
	while [ -e "$pause_file" ]; do sleep 10; done
	MODE=open CAPACITY=20 SERVICE_MS=20 LEVELS=10 DURATION=5 CONFIGS=nginx-limit \
		timeout 300 "$bench/overload.sh" >"$log" 2>&1 || true
	cpu=$(grep -o 'proxy CPU [0-9]*%' "$log" | grep -o '[0-9]*' | head -1 || true)
	echo "$(date +%T) probe $i: NGINX at 10x used ${cpu:-?}% CPU (quiet: <= $quiet_cpu)" >&2
	if [ -n "$cpu" ] && [ "$cpu" -le "$quiet_cpu" ]; then streak=$((streak + 1)); else streak=0; fi
	if [ "$streak" -ge 2 ]; then
		exec env "$@"
	fi
	sleep "$pause"
done
echo "$0: the host did not get quiet in $probes probes" >&2
exit 3
