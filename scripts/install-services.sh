#!/usr/bin/env bash
# Installs the outside services levee's tests run against for real (Debian
# 12 packages), without starting them: the tests start their own copies on
# loopback ports with fresh data directories and stop them afterwards.
#   etcd 3.4 (etcd-server): the etcd discovery source.
#   PostgreSQL 15 (postgresql-15): the data sources (internal/testsvc runs
#   initdb and postgres from /usr/lib/postgresql/15/bin as user postgres).
#   Redis 7.0 (redis-server): cluster mode's shared limits.
#   Prometheus 2.42 (prometheus, which brings promtool): the shipped alert
#   rules (deploy/prometheus) are unit-tested with promtool and proven to
#   fire in a real Prometheus scraping a real levee (internal/testsvc).
#   Chromium (chromium): the admin web UI is tested in headless Chromium
#   driven by chromedp (internal/testsvc.ChromiumPath).
#   NGINX (nginx): the peer the slow-client and HTTP/2 flood tests measure
#   side by side with levee in the same run (internal/testsvc.NGINX).
#   zsh and fish: levee completion zsh|fish is syntax-checked with zsh -n
#   and fish -n (cmd/levee TestCompletionScripts).
#   systemd (systemd-analyze): deploy/systemd/levee.service is verified
#   (cmd/levee TestSystemdUnit).
#   Ory Hydra (built with go, see install_hydra): the real OpenID provider
#   the JWT tests take tokens from (internal/testsvc.StartHydra).
#   openssl and sqlite3: the instructions in examples/' headers that make
#   a certificate, tokens and a database are run (cmd/levee TestExamplesValidate).
#   Pebble v2.10.3 (Let's Encrypt's test ACME server, a Go program): built
#   from its own tools module (tools/pebble, so levee's go.mod does not
#   grow) into $LEVEE_TOOLS_CACHE (default ~/.cache/levee-tools), outside
#   the repo and cached across runs (internal/testsvc.PebblePath).
#   h2spec v2.2.1 (the HTTP/2 conformance tester, a Go program): built from
#   tools/h2spec like Hydra (install_h2spec) into the directory
#   internal/testsvc.H2specPath reads; TestH2specConformance runs it
#   against levee's listeners.
#   h2load (nghttp2-client): bench/tls-compare.sh's h2 load generator.
# Safe to run repeatedly; does nothing when everything is present.
set -euo pipefail
tools_cache="${LEVEE_TOOLS_CACHE:-$HOME/.cache/levee-tools}"
pebble="$tools_cache/pebble-v2.10.3/pebble"
if [ ! -x "$pebble" ]; then
  repo="$(cd "$(dirname "$0")/.." && pwd)"
  mkdir -p "$(dirname "$pebble")"
  (cd "$repo/tools/pebble" && GOFLAGS=-buildvcs=false go build -o "$pebble.tmp" github.com/letsencrypt/pebble/v2/cmd/pebble && mv "$pebble.tmp" "$pebble")
fi
need=()
command -v etcd >/dev/null || need+=(etcd-server)
command -v redis-server >/dev/null || need+=(redis-server)
{ command -v prometheus >/dev/null && command -v promtool >/dev/null; } || need+=(prometheus)
command -v chromium >/dev/null || need+=(chromium)
{ command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; } || need+=(nginx)
command -v zsh >/dev/null || need+=(zsh)   # levee completion zsh is checked with zsh -n
command -v fish >/dev/null || need+=(fish) # and fish with fish -n
command -v systemd-analyze >/dev/null || need+=(systemd) # verifies deploy/systemd/levee.service
command -v openssl >/dev/null || need+=(openssl) # examples/' instructions (TestExamplesValidate)
command -v sqlite3 >/dev/null || need+=(sqlite3)
command -v h2load >/dev/null || need+=(nghttp2-client) # bench/tls-compare.sh
for b in initdb postgres psql; do
  if [ ! -x "/usr/lib/postgresql/15/bin/$b" ]; then need+=(postgresql-15); break; fi
done
# Ory Hydra (an OpenID provider, a Go program): built from tools/hydra, its
# own module (levee's go.mod does not grow), into a cache outside the repo
# that internal/testsvc.HydraPath reads. Skipped when the binary of this
# version is there: CI runs this script every time. The first build takes
# minutes (about 30 on a busy 2-core machine with an empty module cache).
install_hydra() {
  local repo ver dir
  repo="$(cd "$(dirname "$0")/.." && pwd)"
  ver="$(awk '$1 == "github.com/ory/hydra/v2" {print $2; exit}' "$repo/tools/hydra/go.mod")"
  dir="${LEVEE_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/levee-tools}/hydra-$ver"
  [ -x "$dir/hydra" ] && return 0
  mkdir -p "$dir"
  echo "install-services: building Ory Hydra $ver into $dir (once)" >&2
  local start=$SECONDS
  (cd "$repo/tools/hydra" && GOTOOLCHAIN=local GOFLAGS=-buildvcs=false go build -tags sqlite,sqlite_omit_load_extension \
    -o "$dir/hydra.tmp" github.com/ory/hydra/v2) && mv "$dir/hydra.tmp" "$dir/hydra"
  echo "install-services: Ory Hydra $ver built in $((SECONDS - start))s" >&2
}
install_hydra
# h2spec (HTTP/2 conformance, a Go program): built from tools/h2spec into
# h2spec-<version>/h2spec beside Hydra (internal/testsvc.H2specPath).
install_h2spec() {
  local repo ver dir
  repo="$(cd "$(dirname "$0")/.." && pwd)"
  ver="$(awk '$1 == "github.com/summerwind/h2spec" {sub(/\+incompatible$/, "", $2); print $2; exit}' "$repo/tools/h2spec/go.mod")"
  dir="${LEVEE_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/levee-tools}/h2spec-$ver"
  [ -x "$dir/h2spec" ] && return 0
  mkdir -p "$dir"
  echo "install-services: building h2spec $ver into $dir (once)" >&2
  (cd "$repo/tools/h2spec" && GOTOOLCHAIN=local GOFLAGS=-buildvcs=false go build \
    -o "$dir/h2spec.tmp" github.com/summerwind/h2spec/cmd/h2spec) && mv "$dir/h2spec.tmp" "$dir/h2spec"
}
install_h2spec
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "install-services: need root to apt-get install ${need[*]}" >&2
  exit 1
fi
# Keep the packages' own services from starting: the tests run their own.
printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
chmod +x /usr/sbin/policy-rc.d
trap 'rm -f /usr/sbin/policy-rc.d' EXIT
export DEBIAN_FRONTEND=noninteractive
for attempt in 1 2 3; do
  if apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; then
    exit 0
  fi
  echo "install-services: apt-get failed (attempt $attempt), retrying" >&2
  sleep $((attempt * 5))
done
exit 1
