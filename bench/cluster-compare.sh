#!/usr/bin/env bash
# Shared limits (cluster.redis) against local limits, side by side in one
# proxy-compare run: the same anonymous limit on the route (10^9/s, never
# refusing, so both measure the decision's cost), decided in memory
# (limits-local) and through a redis-server on loopback (limits-redis),
# interleaved in rounds. Prints each round's requests/s of both and the
# ratio shared / local, the mean ratio, and Redis's EVALSHA calls and read
# events per request levee answered (round trips: one EVALSHA per
# decision; concurrent decisions share a pipeline, one read event).
#   bench/cluster-compare.sh                 # ROUNDS=3 DURATION=5
#   ROUNDS=5 DURATION=10 bench/cluster-compare.sh
# Environment: ROUNDS (3), DURATION (5), BENCH_DIR (../shared/bench),
# LEVEE_BIN (bin/levee, built when missing). LEVEE_BIN_BEFORE=<another
# levee binary> adds a third proxy, limits-redis-before, with shared limits
# in that build (its Redis on port 16380), to compare two builds in one run. The full proxy-compare output
# goes to stdout first; the summary comes last.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bench=${BENCH_DIR:-$here/../shared/bench}
export ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-5}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cd "$here"
extras=(--extra 'limits-local=LEVEE_RATELIMIT=local exec bench/levee-extra.sh'
	--extra 'limits-redis=LEVEE_RATELIMIT=redis exec bench/levee-extra.sh')
if [ -n "${LEVEE_BIN_BEFORE:-}" ]; then
	extras+=(--extra "limits-redis-before=LEVEE_BIN=$LEVEE_BIN_BEFORE LEVEE_REDIS_PORT=16380 LEVEE_RATELIMIT=redis exec bench/levee-extra.sh")
fi
"$bench/proxy-compare.sh" --proxies direct "${extras[@]}" | tee "$log"
scratch=$(sed -n 's/.*scratch dir: //p' "$log" | head -1)
case $scratch in /*) ;; *) scratch=$bench/$scratch ;; esac
[ -f "$scratch/results.tsv" ] || { echo "cluster-compare: no results.tsv in $scratch" >&2; exit 1; }
echo
echo "=== cluster-compare: shared (Redis) vs local limits, same run (ROUNDS=$ROUNDS DURATION=${DURATION}s)"
awk -F'\t' '
	$2 == "limits-local" { l[$1] = $3; lc[$1] = $16 }
	$2 == "limits-redis" { r[$1] = $3; rc[$1] = $16 }
	$2 == "limits-redis-before" { b[$1] = $3; bc[$1] = $16 }
	END {
		for (i = 1; i in l || i in r; i++) {
			if (l[i] + 0 > 0 && r[i] + 0 > 0) {
				printf "round %d: local %s req/s (%s us CPU/req), shared %s req/s (%s us CPU/req), ratio %.2fx", i, l[i], lc[i], r[i], rc[i], r[i] / l[i]
				sum += r[i] / l[i]; n++
				if (b[i] + 0 > 0) {
					printf "; before: shared %s req/s (%s us CPU/req), ratio %.2fx", b[i], bc[i], b[i] / l[i]
					bsum += b[i] / l[i]; bn++
				}
				printf "\n"
			} else {
				printf "round %d: local %s, shared %s: not comparable\n", i, l[i], r[i]
			}
		}
		if (n) printf "mean ratio shared/local: %.2fx over %d rounds\n", sum / n, n
		if (bn) printf "mean ratio shared/local, build before: %.2fx over %d rounds\n", bsum / bn, bn
	}' "$scratch/results.tsv"
# The last sample of each levee (one per round) before it stopped.
stats=$scratch/extra/redis-stats.log
if [ -s "$stats" ]; then
	awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } last[v["pid"]] = $0; e[v["pid"]] = v["evalsha"]; rd[v["pid"]] = v["reads"]; port[v["pid"]] = v["port"]; q[v["pid"]] = v["requests"]; if (!(v["pid"] in seen)) { seen[v["pid"]] = 1; order[++n] = v["pid"] } }
		END {
			for (i = 1; i <= n; i++) {
				p = order[i]
				if (q[p] > 0) printf "levee pid %s (Redis port %s): %d requests, %d EVALSHA (%.3f per request), %d Redis read events (%.3f per request)\n", p, port[p], q[p], e[p], e[p] / q[p], rd[p], rd[p] / q[p]
			}
		}' "$stats"
else
	echo "no $stats: round trips not counted"
fi
