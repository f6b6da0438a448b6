#!/usr/bin/env bash
# Gitea, the real forge behind the git sink's review-mode tests (test/integration/review-gitea.test.ts):
# build the pinned release from source with the local Go toolchain into
#   ${KOLLECT_TOOLS_DIR:-$HOME/.cache/kollect-tools}/gitea-<version>/gitea
# next to the release's module source (…/gitea-<version>/src), which the tests give Gitea as its
# STATIC_ROOT_PATH: a build without the `bindata` tag reads its templates and options from there.
# GITEA points at a prebuilt binary instead (no Go needed); GITEA_STATIC_ROOT at its static root
# (default: the cached source, which this script then fetches without building).
#
#   scripts/install-gitea.sh                build if missing, then print what is used
#   scripts/install-gitea.sh --print-paths  only print GITEA=path and GITEA_STATIC_ROOT=path
#
# From the Go module proxy like helm (CI reaches nothing else). Not `go install`: Gitea's go.mod
# has replace directives, which only a build inside the module honours, so the module directory is
# copied out of the read-only module cache and built there. SQLite needs cgo (a C compiler). A cold
# build takes three to ten minutes on two cores (module downloads included).
set -euo pipefail
cd "$(dirname "$0")/.."
TOOL_SCRIPT=install-gitea
# shellcheck source=lib/tools.sh
. scripts/lib/tools.sh

GITEA_VERSION=v1.26.0

go_tool_bin GITEA gitea "$GITEA_VERSION"
STATIC_ROOT="${GITEA_STATIC_ROOT:-$TOOL_DIR/src}"
if [ "${1:-}" = "--print-paths" ]; then
  echo "GITEA=$TOOL_BIN"
  echo "GITEA_STATIC_ROOT=$STATIC_ROOT"
  exit 0
fi

gitea_version() { "$1" --version 2>/dev/null | sed -n 's/^[Gg]itea version \([^ ]*\).*/\1/p'; }

# fetch_source: the release's module source at $TOOL_DIR/src, writable (the module cache is not).
# Copied to a temporary name first, so an interrupted copy is never taken for a finished one.
fetch_source() {
  [ -f "$TOOL_DIR/src/go.mod" ] && return
  use_go 1.21.0
  local dir
  # Outside any module, so no go.mod here changes what is resolved.
  dir="$(cd / && GOFLAGS=-mod=mod GO111MODULE=on "$GO" mod download -json "code.gitea.io/gitea@$GITEA_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [ -f "$dir/go.mod" ] || { echo "install-gitea: no module source for code.gitea.io/gitea@$GITEA_VERSION ($dir)" >&2; return 1; }
  mkdir -p "$TOOL_DIR"
  rm -rf "$TOOL_DIR/src.tmp"
  cp -R "$dir" "$TOOL_DIR/src.tmp"
  chmod -R u+w "$TOOL_DIR/src.tmp"
  mv "$TOOL_DIR/src.tmp" "$TOOL_DIR/src"
}

if [ -z "${GITEA_STATIC_ROOT:-}" ]; then
  fetch_source
fi
[ -d "$STATIC_ROOT/templates" ] || { echo "install-gitea: $STATIC_ROOT has no templates/: not a Gitea static root" >&2; exit 1; }

if [ -n "${GITEA:-}" ]; then
  [ -x "$TOOL_BIN" ] || { echo "install-gitea: GITEA=$TOOL_BIN is not an executable" >&2; exit 1; }
elif [ "$(gitea_version "$TOOL_BIN")" != "${GITEA_VERSION#v}" ]; then
  use_go "$(go_line "$TOOL_DIR/src")"
  echo "install-gitea: building gitea $GITEA_VERSION with $("$GO" version | cut -d' ' -f3) into $TOOL_DIR"
  start=$SECONDS
  tags="sqlite sqlite_unlock_notify"
  # What Gitea's Makefile sets, so `gitea --version` names the release.
  ldflags="-s -w -X main.Version=${GITEA_VERSION#v} -X 'main.Tags=$tags'"
  (cd "$TOOL_DIR/src" && CGO_ENABLED=1 GOFLAGS="-mod=readonly -trimpath -buildvcs=false -p=${KOLLECT_BUILD_JOBS:-2}" \
    "$GO" build -tags "$tags" -ldflags "$ldflags" -o "$TOOL_BIN.tmp" .)
  # Moved in place only once complete, so an interrupted build is never taken for a finished one.
  mv "$TOOL_BIN.tmp" "$TOOL_BIN"
  echo "install-gitea: built gitea in $((SECONDS - start)) s"
fi
echo "install-gitea: gitea $(gitea_version "$TOOL_BIN") at $TOOL_BIN, static root $STATIC_ROOT"
