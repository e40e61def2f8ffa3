#!/usr/bin/env bash
# Installs what ../shared/bench needs to run levee side by side with nginx,
# HAProxy and Caddy (Debian 12). The packages' own services are kept from
# starting: the bench scripts run their own copies on loopback high ports.
set -euo pipefail
need=()
for cmd in nginx haproxy caddy wrk curl; do command -v "$cmd" >/dev/null || need+=("$cmd"); done
[ ${#need[@]} -eq 0 ] && exit 0
printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
chmod +x /usr/sbin/policy-rc.d
trap 'rm -f /usr/sbin/policy-rc.d' EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
