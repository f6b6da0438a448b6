#!/usr/bin/env bash
# actionlint, the linter test/deploy/workflows.test.ts runs over .github/workflows: build the
# pinned release from source with the local Go toolchain into
#   ${KOLLECT_TOOLS_DIR:-$HOME/.cache/kollect-tools}/actionlint-<version>/actionlint
# unless that binary is already there. ACTIONLINT points at a prebuilt binary instead (no Go needed).
#
#   scripts/install-actionlint.sh                build if missing, then print the binary used
#   scripts/install-actionlint.sh --print-paths  only print ACTIONLINT=path (what the tests read)
#
# From the Go module proxy like helm (CI reaches nothing else). actionlint runs shellcheck on
# `run:` scripts only when a shellcheck is on PATH; without one it skips that check silently.
set -euo pipefail
cd "$(dirname "$0")/.."
TOOL_SCRIPT=install-actionlint
# shellcheck source=lib/tools.sh
. scripts/lib/tools.sh

ACTIONLINT_VERSION=v1.7.12
# actionlint v1.7.12's go.mod: the oldest Go that builds it.
ACTIONLINT_GO=1.25.0

go_tool_bin ACTIONLINT actionlint "$ACTIONLINT_VERSION"
if [ "${1:-}" = "--print-paths" ]; then
  echo "ACTIONLINT=$TOOL_BIN"
  exit 0
fi

# `go install` stamps the module version into the binary, which -version prints first.
actionlint_current() { [ "$("$1" -version 2>/dev/null | head -1)" = "$ACTIONLINT_VERSION" ]; }
go_tool ACTIONLINT actionlint "$ACTIONLINT_VERSION" "$ACTIONLINT_GO" github.com/rhysd/actionlint/cmd/actionlint "-s -w" actionlint_current
echo "install-actionlint: actionlint $("$TOOL_BIN" -version | head -1) at $TOOL_BIN"
