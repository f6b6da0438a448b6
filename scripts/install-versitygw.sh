#!/usr/bin/env bash
# versitygw, the S3 server the s3 sink's tests start on loopback (test/support/s3.ts): build the
# pinned release from source with the local Go toolchain into
#   ${KOLLECT_TOOLS_DIR:-$HOME/.cache/kollect-tools}/versitygw-<version>/versitygw
# unless that binary is already there. VERSITYGW points at a prebuilt binary instead (no Go needed).
#
#   scripts/install-versitygw.sh                build if missing, then print the binary used
#   scripts/install-versitygw.sh --print-paths  only print VERSITYGW=path (what the tests read)
#
# From the Go module proxy like helm (CI reaches nothing else); Apache-2.0, no replace
# directives, so `go install` builds it as released. A cold build takes about 100 s on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
TOOL_SCRIPT=install-versitygw
# shellcheck source=lib/tools.sh
. scripts/lib/tools.sh

VERSITYGW_VERSION=v1.8.0
# versitygw v1.8.0's go.mod: the oldest Go that builds it.
VERSITYGW_GO=1.25.0

go_tool_bin VERSITYGW versitygw "$VERSITYGW_VERSION"
if [ "${1:-}" = "--print-paths" ]; then
  echo "VERSITYGW=$TOOL_BIN"
  exit 0
fi

# The directory is keyed by version, so a binary there is the pinned one.
go_tool VERSITYGW versitygw "$VERSITYGW_VERSION" "$VERSITYGW_GO" github.com/versity/versitygw/cmd/versitygw "-s -w"
echo "install-versitygw: versitygw at $TOOL_BIN"
