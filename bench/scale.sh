#!/usr/bin/env bash
# Proof at scale (issue 28.5): reload and data-API publish time, and memory,
# with 5,000 routes (4,005 proxied over 50 upstreams, 995 data APIs from the
# file on one embedded SQLite source, 5 more through the admin API: the data
# store's cap of 1,000) and 10,000 apps (each with a key and two grants).
# Runs the load test TestScaleReloadAndPublish (internal/gateway, without
# -race) with LEVEE_SCALE_FULL=1 (three levees for the memory per route and
# per app, five reloads and publishes; the load step runs one levee and two
# of each) and prints its "SCALE" figures:
#   start_ms                levee's start with everything (first seeding of 10,000 apps)
#   reload_ms_median/max    five reloads, each changing one header
#   reload_peak_extra_mib   the live heap's peak above its level before a reload (sampled every 5 ms)
#   reload_alloc_mib        bytes a reload allocated in all (garbage included)
#   rss_mib / live_heap_mib the process's RSS and live heap before and after the reloads
#   bytes_per_route/app     live heap per route (the mix above) and per app
#   publish_ms_median/max   five publishes through the admin API at 996..1000 data APIs
#   full_gc_ms              one runtime.GC at the levee's heap (what a reload's
#                           collection after its parse costs)
#   reload_cpu_ms           each reload's process CPU (user + system), and its wall time
# The test asserts the targets the machine's load does not decide: a
# reload's live-heap peak under 100 MiB and its allocation under 140 MiB,
# its CPU under 1 s, a publish's CPU under 200 ms; wall times are compared
# in docs/performance.md ("Scale"). CPU=1 adds a CPU profile of the
# reloads alone (scale.cpu.pprof); MEM=1 heap profiles before and after
# them (scale.heap.before, scale.heap.after: go tool pprof
# -sample_index=alloc_space -diff_base scale.heap.before ... shows what
# the reloads allocated); RUNS=n reloads and publishes n times (default 5).
#   bench/scale.sh | tee bench/results-DATE-scale.txt
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=${GOTOOLCHAIN:-local} GOFLAGS=${GOFLAGS:--buildvcs=false}
[ -n "${CPU:-}" ] && export LEVEE_SCALE_CPUPROF="$PWD/scale.cpu.pprof"
[ -n "${MEM:-}" ] && export LEVEE_SCALE_HEAPPROF="$PWD/scale.heap"
[ -n "${RUNS:-}" ] && export LEVEE_SCALE_RUNS="$RUNS"
echo "# bench/scale.sh $(date -u +%FT%TZ) $(git rev-parse --short HEAD 2>/dev/null) on $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
LEVEE_SCALE_FULL=1 go test -count=1 -run '^TestScaleReloadAndPublish$' -v ./internal/gateway/ 2>&1 |
  grep -E 'SCALE|^(--- |ok|FAIL|PASS)|scale_load_test' || true
