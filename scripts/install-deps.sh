#!/usr/bin/env bash
# System packages the tests need: PostgreSQL and nats-server (real servers, started by the tests
# on loopback ports), git, Java, Maven and openssl for the Kafka broker, Chromium for the docs
# site, and Go to build helm, kube-apiserver, etcd and versitygw (scripts/install-*.sh). Debian
# packages only; idempotent.
# Debian 12's Go (1.19) is too old to build them itself; scripts/lib/tools.sh then fetches a
# newer toolchain from the Go module proxy.
#
# The environment variables that point at prebuilt tools (CONTRIBUTING.md, "Development") are
# honoured: what one names is not installed, and one that names nothing usable is an error.
#
#   scripts/install-deps.sh          install what is missing
#   scripts/install-deps.sh --check  only print what would be installed and what is used (exit 1 on a bad variable)
set -euo pipefail

check=false
[ "${1:-}" = "--check" ] && check=true

need=()
bad=0
# override NAME TEST: NAME is set; fail unless `TEST value` holds. Prints what is used.
override() {
  local name="$1" test="$2" value="${!1:-}"
  if $test "$value"; then
    echo "using $name=$value"
  else
    echo "install-deps: $name=$value: $3" >&2
    bad=1
  fi
}
is_exec() { [ -f "$1" ] && [ -x "$1" ]; }
is_command() { [ -n "$(type -P "$1" 2>/dev/null)" ]; }
is_pg_bin() { is_exec "$1/initdb" && is_exec "$1/pg_ctl" && is_exec "$1/postgres"; }
is_dir() { [ -d "$1" ]; }

command -v git >/dev/null || need+=(git)
if [ -n "${NATS_SERVER:-}" ]; then
  override NATS_SERVER is_command 'not an executable nats-server (a path, or a command on PATH)'
else
  command -v nats-server >/dev/null || need+=(nats-server)
fi
if [ -n "${PG_BIN:-}" ]; then
  override PG_BIN is_pg_bin 'not a PostgreSQL bin directory (initdb, pg_ctl and postgres)'
else
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
fi
# The Kafka broker of the Kafka sink tests: Maven fetches its jars (scripts/install-kafka.sh), Java
# runs it, openssl makes its TLS listener's certificate.
if [ -n "${JAVA:-}" ]; then
  override JAVA is_command 'not an executable java (a path, or a command on PATH)'
else
  command -v java >/dev/null || need+=(openjdk-17-jre-headless)
fi
if [ -n "${KOLLECT_KAFKA_LIB:-}" ]; then
  override KOLLECT_KAFKA_LIB is_dir 'not a directory of Kafka jars'
else
  command -v mvn >/dev/null || need+=(maven)
fi
command -v openssl >/dev/null || need+=(openssl)
# The browser test/cli/site.test.ts loads the built docs site in.
if [ -n "${CHROMIUM:-}" ]; then
  override CHROMIUM is_command 'not an executable Chromium (a path, or a command on PATH)'
else
  command -v chromium >/dev/null || need+=(chromium)
fi
# Go only builds the Go tools; with all of them prebuilt, none is needed.
go_names=(HELM KOLLECT_KUBE_APISERVER KOLLECT_ETCD VERSITYGW ACTIONLINT PROMTOOL GITEA)
go_tools=0
for name in "${go_names[@]}"; do
  if [ -n "${!name:-}" ]; then
    override "$name" is_exec 'not an executable file'
    go_tools=$((go_tools + 1))
  fi
done
# Gitea's templates come from its module source, which Go fetches unless GITEA_STATIC_ROOT names one.
if [ -n "${GITEA_STATIC_ROOT:-}" ]; then
  override GITEA_STATIC_ROOT is_dir 'not a Gitea source tree'
else
  [ -z "${GITEA:-}" ] || go_tools=$((go_tools - 1))
fi
[ "$go_tools" = "${#go_names[@]}" ] || command -v go >/dev/null || need+=(golang-go)

[ "$bad" = 0 ] || exit 1
if $check; then
  echo "would install: ${need[*]:-nothing}"
  exit 0
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
echo "system dependencies present: git $(git --version | cut -d' ' -f3), nats-server $("${NATS_SERVER:-nats-server}" --version 2>&1 | head -1), postgres ${PG_BIN:-$(ls -d /usr/lib/postgresql/*/ | head -1)}, go $go_used"
