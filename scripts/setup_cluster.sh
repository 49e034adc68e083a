#!/usr/bin/env bash
# Installs what yiemagent.ray_cluster and its tests need, on top of scripts/setup.sh: the 'ray'
# extra (Ray and the redis client) into .venv, and redis-server (Debian's package) when it is
# missing. Kept apart from setup.sh so that the core install stays small.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  echo "setup_cluster.sh: .venv is missing; run scripts/setup.sh first" >&2
  exit 1
fi
.venv/bin/python -m pip install --quiet -e '.[dev,ray]' --config-settings editable_mode=compat

if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    # The tests start their own server on a free port; keep the package from starting the
    # system one (policy-rc.d refuses service starts while it exists), unless a policy is set.
    policy=/usr/sbin/policy-rc.d
    own_policy=0
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && own_policy=1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    if [ "$own_policy" -eq 1 ]; then rm -f "$policy"; fi
  else
    echo "setup_cluster.sh: redis-server is not installed and this is not a root shell with" \
         "apt-get; install it (as root: apt-get install -y redis-server), or the Redis tests" \
         "are skipped" >&2
    exit 1
  fi
fi
echo "ray extra installed in .venv; redis-server: $(command -v redis-server)"
