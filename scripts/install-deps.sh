#!/usr/bin/env bash
# System packages the tests need: PostgreSQL and nats-server (real servers, started by the tests
# on loopback ports) and git. Debian packages only; idempotent.
set -euo pipefail

need=()
command -v git >/dev/null || need+=(git)
command -v nats-server >/dev/null || need+=(nats-server)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)

if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
# The Debian package starts a cluster on 5432; the tests run their own, so leave it alone.
echo "system dependencies present: git $(git --version | cut -d' ' -f3), nats-server $(nats-server --version 2>&1 | head -1), postgres $(ls -d /usr/lib/postgresql/*/ | head -1)"
