#!/usr/bin/env bash
# Helm for the chart tests (test/deploy/chart.test.ts) and e2e/kind: build the pinned release
# from source with the local Go toolchain into .cache/bin/helm (gitignored), unless that binary
# is already there at the pinned version. Prints the helm version; the binary's path is
# .cache/bin/helm relative to the repository root.
#
# From source rather than a downloaded tarball because CI reaches the Go module proxy and
# nothing else. A cold build takes one to two minutes (module downloads included).
set -euo pipefail
cd "$(dirname "$0")/.."

HELM_VERSION=v3.16.4
# The Kubernetes version `helm template` and `helm lint` assume without --kube-version. Helm's
# Makefile derives it from its client-go (v0.31.x → 1.31); `go install` alone would leave the
# fallback 1.20, and the chart's kubeVersion (>=1.30) would reject it.
K8S_MAJOR=1
K8S_MINOR=31

BIN_DIR="$PWD/.cache/bin"
HELM="$BIN_DIR/helm"

current=""
if [ -x "$HELM" ]; then
  current="$("$HELM" version --template '{{.Version}}' 2>/dev/null || true)"
fi

if [ "$current" != "$HELM_VERSION" ]; then
  command -v go >/dev/null || { echo "install-helm: go is not installed; install Go or set HELM to a helm binary" >&2; exit 1; }
  echo "install-helm: building helm $HELM_VERSION with $(go version | cut -d' ' -f3) into $BIN_DIR"
  mkdir -p "$BIN_DIR"
  ldflags="-s -w"
  ldflags+=" -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ldflags+=" -X $pkg.k8sVersionMajor=$K8S_MAJOR -X $pkg.k8sVersionMinor=$K8S_MINOR"
  done
  GOBIN="$BIN_DIR" CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath" \
    go install -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi

"$HELM" version
