#!/usr/bin/env bash
# Runs staticcheck (honnef.co/go/tools), the linter `make vet` adds to go
# vet, with its default checks. On first use it installs the pinned version
# into bin/tools with `go install` (through the Go module proxy, 1 to 2
# minutes cold on 2 cores); afterwards it only checks that the binary there
# is that version, built by the Go in use (a staticcheck built by an older
# Go cannot load packages of a newer standard library), and reinstalls it
# when not. Arguments are staticcheck's (make vet passes ./...).
set -euo pipefail
version=v0.8.2
GO=${GO:-go}
cd "$(dirname "$0")/.."
bin=bin/tools/staticcheck
built_by() { "$GO" version "$bin" 2>/dev/null | awk '{print $2}'; }
if ! [ -x "$bin" ] || ! "$bin" -version 2>/dev/null | grep -qF "(${version#v})" ||
  [ "$(built_by)" != "$("$GO" env GOVERSION)" ]; then
  echo "staticcheck: installing honnef.co/go/tools/cmd/staticcheck@$version into bin/tools" >&2
  GOBIN="$PWD/bin/tools" "$GO" install "honnef.co/go/tools/cmd/staticcheck@$version"
fi
exec "$bin" "$@"
