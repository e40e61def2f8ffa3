#!/usr/bin/env bash
# Runs the Makefile's fuzz targets (arguments: package:Target:executions,
# as in FUZZ_TARGETS), two packages at a time, for `make fuzz`.
#
# Each package's fuzz-instrumented test binary is built once (go test -c
# -fuzz, the build `go test -fuzz` does) and run for each of its targets
# with one fuzz worker (-test.parallel=1): two packages at once on two
# cores use the CPU that one target with two workers did, while one
# package's build, baseline coverage and start-up overlap the other's
# fuzzing. Each run's budget is an execution count (times FUZZSCALE), as
# before; minimising a new interesting input is capped at 200 executions.
# A binary runs in its package's directory, so a crasher lands in that
# package's testdata/fuzz as with `go test -fuzz`; new interesting inputs
# go to the same cache as `go test -fuzz` uses ($GOCACHE/fuzz/<import
# path>). A package's output is printed whole when it is done, with the
# seconds each target took; the script fails if any target fails.
set -euo pipefail
GO=${GO:-go}
FUZZSCALE=${FUZZSCALE:-1}
cd "$(dirname "$0")/.."
root=$PWD
module=$("$GO" list -m)
cache=$("$GO" env GOCACHE)/fuzz
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ "${1:-}" = "--package" ]; then
  # One package: --package ./dir Target:n ...
  pkg=$2
  shift 2
  dir=${pkg#./}
  bin="$work/$(echo "$dir" | tr / _).test"
  out="$work/out"
  since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
  (
    fail=0
    start=$EPOCHREALTIME
    if ! "$GO" test -c -fuzz=. -o "$bin" "$pkg"; then
      echo "FAIL $pkg: build"
      exit 1
    fi
    echo "fuzz $pkg: built in $(since "$start") s"
    cd "$root/$dir"
    for t in "$@"; do
      name=${t%%:*}
      n=$(( ${t##*:} * FUZZSCALE ))
      echo "fuzz $pkg $name for $n executions"
      start=$EPOCHREALTIME
      if ! "$bin" -test.run='^$' -test.fuzz="^$name\$" -test.fuzztime="${n}x" \
        -test.fuzzminimizetime=200x -test.parallel=1 -test.timeout=10m -test.paniconexit0 \
        -test.fuzzcachedir="$cache/$module/$dir"; then
        echo "FAIL $pkg $name"
        fail=1
      fi
      echo "fuzz $pkg $name: $(since "$start") s"
    done
    exit $fail
  ) >"$out" 2>&1 && rc=0 || rc=$?
  cat "$out"
  exit $rc
fi

# Group the targets by package, in the order the packages first appear.
declare -A targets
order=()
for t in "$@"; do
  pkg=${t%%:*}
  rest=${t#*:}
  if [ -z "${targets[$pkg]+x}" ]; then
    order+=("$pkg")
    targets[$pkg]=""
  fi
  targets[$pkg]+=" $rest"
done
# Two packages at a time (xargs -P 2 starts the next when one ends); the
# exit status is non-zero if any package's run failed.
for pkg in "${order[@]}"; do
  echo "$pkg${targets[$pkg]}"
done | xargs -P 2 -L 1 "$0" --package
