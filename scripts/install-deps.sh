#!/usr/bin/env bash
# System packages the tests need: PostgreSQL and nats-server (real servers, started by the tests
# on loopback ports), git, and Go to build helm, kube-apiserver and etcd (scripts/install-helm.sh,
# scripts/install-kube.sh) unless HELM, KOLLECT_KUBE_APISERVER and KOLLECT_ETCD all name prebuilt
# binaries. Debian packages only; idempotent. Debian 12's Go (1.19) is too old to build them
# itself; scripts/lib/tools.sh then fetches a newer toolchain from the Go module proxy.
set -euo pipefail

need=()
command -v git >/dev/null || need+=(git)
command -v nats-server >/dev/null || need+=(nats-server)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
# The Kafka broker of the Kafka sink tests: Maven fetches its jars (scripts/install-kafka.sh), Java
# runs it, openssl makes its TLS listener's certificate.
command -v java >/dev/null || need+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || need+=(maven)
command -v openssl >/dev/null || need+=(openssl)
if [ -z "${HELM:-}" ] || [ -z "${KOLLECT_KUBE_APISERVER:-}" ] || [ -z "${KOLLECT_ETCD:-}" ]; then
  command -v go >/dev/null || need+=(golang-go)
fi

if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  # The tests start their own PostgreSQL and nats-server on free ports: the packages' services
  # (a cluster on :5432, nats-server on :4222) must neither start now nor at the next boot.
  # A policy-rc.d that answers 101 stops the maintainer scripts from starting them; an existing
  # one is the machine's and stays as it is.
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    trap '$SUDO rm -f "$policy"' EXIT
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
  # The packages still enable their units; systemctl disables them offline too (no systemd
  # running, as in containers), and --now stops one that runs anyway.
  if command -v systemctl >/dev/null; then
    now=""
    [ -d /run/systemd/system ] && now="--now"
    for pkg in "${need[@]}"; do
      case "$pkg" in
        nats-server) $SUDO systemctl disable $now --quiet nats-server.service ;;
        postgresql) $SUDO systemctl disable $now --quiet postgresql.service ;;
      esac
    done
  fi
fi
go_used="$(command -v go >/dev/null && go version | cut -d' ' -f3 || echo 'none (prebuilt tools)')"
echo "system dependencies present: git $(git --version | cut -d' ' -f3), nats-server $(nats-server --version 2>&1 | head -1), postgres $(ls -d /usr/lib/postgresql/*/ | head -1), go $go_used"
