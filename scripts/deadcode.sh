#!/usr/bin/env bash
# Runs deadcode (golang.org/x/tools/cmd/deadcode, rapid type analysis)
# and fails when it lists anything. With no arguments (make vet) it lists
# the functions that nothing reaches, not main nor any test (-test ./...):
# delete them. `scripts/deadcode.sh ./cmd/levee` lists what only tests
# (or the public client package) reach, for a look: a function there that
# only a test needs may belong in a _test.go file. Installed on first use
# (pinned, into bin/tools, through the Go module proxy; about 2 minutes
# cold on 2 cores), reinstalled when the Go in use is not the one that
# built it, as scripts/staticcheck.sh does.
set -euo pipefail
version=v0.52.0
GO=${GO:-go}
cd "$(dirname "$0")/.."
bin=bin/tools/deadcode
built_by() { "$GO" version "$bin" 2>/dev/null | awk '{print $2}'; }
module_version() { "$GO" version -m "$bin" 2>/dev/null | awk '$1 == "mod" {print $3}'; }
if ! [ -x "$bin" ] || [ "$(module_version)" != "$version" ] || [ "$(built_by)" != "$("$GO" env GOVERSION)" ]; then
  echo "deadcode: installing golang.org/x/tools/cmd/deadcode@$version into bin/tools" >&2
  GOBIN="$PWD/bin/tools" "$GO" install "golang.org/x/tools/cmd/deadcode@$version"
fi
[ $# -gt 0 ] || set -- -test ./...
out=$("$bin" "$@")
if [ -n "$out" ]; then
  echo "$out"
  echo "deadcode: the functions above are unreachable ($*): delete them" >&2
  exit 1
fi
