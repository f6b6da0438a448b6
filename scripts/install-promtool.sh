#!/usr/bin/env bash
# promtool, which checks and unit-tests the chart's PrometheusRule (test/deploy/alerts.test.ts):
# build the pinned release from source with the local Go toolchain into
#   ${KOLLECT_TOOLS_DIR:-$HOME/.cache/kollect-tools}/promtool-<version>/promtool
# unless that binary is already there. PROMTOOL points at a prebuilt binary instead (no Go needed).
#
#   scripts/install-promtool.sh                build if missing, then print the binary used
#   scripts/install-promtool.sh --print-paths  only print PROMTOOL=path (what the tests read)
#
# From the Go module proxy like helm (CI reaches nothing else). Prometheus 3.x publishes its Go
# module as v0.3MM.P for v3.MM.P; its go.mod has no replace or exclude directives, so
# `go install` builds it as released. The `remove_all_sd` build tag, Prometheus's own switch,
# leaves out the service-discovery plugins (the AWS, Azure, GCP… SDKs) that rule checks and rule
# unit tests never load; without it a cold build was about 12 CPU-minutes. A build with a warm Go
# cache takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
TOOL_SCRIPT=install-promtool
# shellcheck source=lib/tools.sh
. scripts/lib/tools.sh

PROMTOOL_VERSION=v0.316.0
# prometheus v0.316.0's go.mod: the oldest Go that builds it.
PROMTOOL_GO=1.26.7

go_tool_bin PROMTOOL promtool "$PROMTOOL_VERSION"
if [ "${1:-}" = "--print-paths" ]; then
  echo "PROMTOOL=$TOOL_BIN"
  exit 0
fi

# What Prometheus's own release build sets, so `promtool --version` names the release.
# v0.316.0 is 3.16.0: the minor's leading 3 is the major, the rest the minor.
release="$(echo "$PROMTOOL_VERSION" | awk -F. '{ printf "3.%d.%s", substr($2, 2), $3 }')"
ldflags="-s -w -X github.com/prometheus/common/version.Version=$release -X github.com/prometheus/common/version.Branch=HEAD"
# The directory is keyed by version, so a binary there is the pinned one.
GOFLAGS="${GOFLAGS:-} -tags=remove_all_sd" \
  go_tool PROMTOOL promtool "$PROMTOOL_VERSION" "$PROMTOOL_GO" github.com/prometheus/prometheus/cmd/promtool "$ldflags"
echo "install-promtool: promtool $("$TOOL_BIN" --version 2>&1 | head -1) at $TOOL_BIN"
