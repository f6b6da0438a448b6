# Shared by the install-*.sh scripts that build test tools from the Go module proxy. Sourced.
#
# Binaries go to a cache outside the clone, keyed by tool and version, so every clone and every
# CI run on a machine shares one build: ${KOLLECT_TOOLS_DIR:-$HOME/.cache/kollect-tools}/<tool>-<version>/.
KOLLECT_TOOLS_DIR="${KOLLECT_TOOLS_DIR:-$HOME/.cache/kollect-tools}"

# The toolchain fetched when the local Go is older than a module needs. Debian 12's golang-go is
# Go 1.19, too old for any of the tools and too old to switch toolchains itself (GOTOOLCHAIN came
# in Go 1.21), so the fetch is explicit: the same golang.org/toolchain module that GOTOOLCHAIN
# downloads, from the module proxy like every other module.
BOOTSTRAP_GO_VERSION=1.26.8

# version_at_least HAVE WANT: true when dotted version HAVE >= WANT.
version_at_least() {
  [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]
}

# use_go MIN: set GO to a go command of at least version MIN (e.g. 1.25.0), fetching the pinned
# toolchain module when the local one is older. Fails when there is no go at all.
use_go() {
  local min="$1" have
  command -v go >/dev/null || { echo "$TOOL_SCRIPT: go is not installed (scripts/install-deps.sh installs Debian's golang-go); or point the environment override at a prebuilt binary" >&2; return 1; }
  have="$(go version | sed -n 's/^go version go\([0-9.]*\).*/\1/p')"
  if version_at_least "$have" "$min"; then
    GO=go
    return
  fi
  version_at_least "$BOOTSTRAP_GO_VERSION" "$min" || { echo "$TOOL_SCRIPT: needs Go $min, newer than the bootstrap toolchain $BOOTSTRAP_GO_VERSION; raise BOOTSTRAP_GO_VERSION in scripts/lib/tools.sh" >&2; return 1; }
  local mod="golang.org/toolchain@v0.0.1-go$BOOTSTRAP_GO_VERSION.$(go env GOOS)-$(go env GOARCH)" dir
  echo "$TOOL_SCRIPT: go $have is older than $min; fetching $mod from the module proxy" >&2
  # Outside any module, so no go.mod here changes what is resolved.
  dir="$(cd / && GOFLAGS=-mod=mod GO111MODULE=on go mod download -json "$mod" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [ -f "$dir/bin/go" ] || { echo "$TOOL_SCRIPT: no go command in $mod ($dir)" >&2; return 1; }
  # Module zips carry no file modes: set the execute bits, as the go command does after its own
  # toolchain download.
  [ -x "$dir/bin/go" ] || chmod -R u+x "$dir/bin" "$dir/pkg/tool"
  GO="$dir/bin/go"
  export GOTOOLCHAIN=local
}

# go_line MODDIR: the go version a module declares (its minimum toolchain).
go_line() {
  awk '$1 == "go" { print $2; exit }' "$1/go.mod"
}

# required_version MODDIR MODULE: the version of MODULE that MODDIR's go.mod requires.
required_version() {
  awk -v m="$2" '$1 == "require" { $1 = ""; $0 = substr($0, 2) } $1 == m { print $2; exit }' "$1/go.mod"
}

# go_tool_bin OVERRIDE TOOL VERSION: set TOOL_DIR to TOOL's cache directory at VERSION and
# TOOL_BIN to the binary used: the one the environment variable named OVERRIDE points at, or the
# cached build.
go_tool_bin() {
  TOOL_DIR="$KOLLECT_TOOLS_DIR/$2-$3"
  TOOL_BIN="${!1:-$TOOL_DIR/$2}"
}

# go_tool OVERRIDE TOOL VERSION GO_MIN PACKAGE LDFLAGS [CURRENT]: make TOOL_BIN (go_tool_bin) a
# binary of TOOL at VERSION. A set OVERRIDE is used as it is (no Go needed), once checked to be
# executable. Otherwise PACKAGE@VERSION is built with Go GO_MIN or newer into TOOL_DIR, unless the
# command CURRENT (given the binary; default: it is executable) accepts the one there.
go_tool() {
  local override="$1" tool="$2" version="$3" go_min="$4" pkg="$5" ldflags="$6" current="${7:-test -x}"
  go_tool_bin "$override" "$tool" "$version"
  if [ -n "${!override:-}" ]; then
    [ -x "$TOOL_BIN" ] || { echo "$TOOL_SCRIPT: $override=$TOOL_BIN is not an executable" >&2; return 1; }
  elif ! $current "$TOOL_BIN"; then
    use_go "$go_min"
    echo "$TOOL_SCRIPT: building $tool $version with $("$GO" version | cut -d' ' -f3) into $TOOL_DIR"
    mkdir -p "$TOOL_DIR"
    rm -rf "$TOOL_DIR.tmp"
    GOBIN="$TOOL_DIR.tmp" CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath" \
      "$GO" install -ldflags "$ldflags" "$pkg@$version"
    # Moved in place only once complete, so an interrupted build is never taken for a finished one.
    mv "$TOOL_DIR.tmp/$tool" "$TOOL_BIN"
    rmdir "$TOOL_DIR.tmp"
  fi
}
