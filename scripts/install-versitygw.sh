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

BIN_DIR="$KOLLECT_TOOLS_DIR/versitygw-$VERSITYGW_VERSION"
VERSITYGW_BIN="${VERSITYGW:-$BIN_DIR/versitygw}"

if [ "${1:-}" = "--print-paths" ]; then
  echo "VERSITYGW=$VERSITYGW_BIN"
  exit 0
fi

if [ -n "${VERSITYGW:-}" ]; then
  [ -x "$VERSITYGW_BIN" ] || { echo "install-versitygw: VERSITYGW=$VERSITYGW_BIN is not an executable" >&2; exit 1; }
elif [ ! -x "$VERSITYGW_BIN" ]; then
  # The directory is keyed by version, so a binary there is the pinned one.
  use_go "$VERSITYGW_GO"
  echo "install-versitygw: building versitygw $VERSITYGW_VERSION with $("$GO" version | cut -d' ' -f3) into $BIN_DIR"
  mkdir -p "$BIN_DIR"
  GOBIN="$BIN_DIR.tmp" CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath" \
    "$GO" install -ldflags "-s -w" "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
  # Moved in place only once complete, so an interrupted build is never taken for a finished one.
  mv "$BIN_DIR.tmp/versitygw" "$VERSITYGW_BIN"
  rmdir "$BIN_DIR.tmp"
fi

echo "install-versitygw: versitygw at $VERSITYGW_BIN"
