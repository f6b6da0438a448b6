#!/usr/bin/env bash
# Helm for the chart tests (test/deploy/chart.test.ts, test/kube) and e2e/kind: build the pinned
# release from source with the local Go toolchain into
#   ${KOLLECT_TOOLS_DIR:-$HOME/.cache/kollect-tools}/helm-<version>/helm
# unless that binary is already there at the pinned version. HELM points at a prebuilt helm
# instead (no Go needed).
#
#   scripts/install-helm.sh                build if missing, then print the version used
#   scripts/install-helm.sh --print-paths  only print HELM=path (what the tests read)
#
# From source rather than a downloaded tarball because CI reaches the Go module proxy and
# nothing else. A cold build takes two to six minutes on two cores (module downloads included).
set -euo pipefail
cd "$(dirname "$0")/.."
TOOL_SCRIPT=install-helm
# shellcheck source=lib/tools.sh
. scripts/lib/tools.sh

HELM_VERSION=v3.16.4
# helm v3.16's go.mod: the oldest Go that builds it.
HELM_GO=1.22.0
# The Kubernetes version `helm template` and `helm lint` assume without --kube-version. Helm's
# Makefile derives it from its client-go (v0.31.x → 1.31); `go install` alone would leave the
# fallback 1.20, and the chart's kubeVersion (>=1.30) would reject it.
K8S_MAJOR=1
K8S_MINOR=31

go_tool_bin HELM helm "$HELM_VERSION"
if [ "${1:-}" = "--print-paths" ]; then
  echo "HELM=$TOOL_BIN"
  exit 0
fi

helm_version() { "$1" version --template '{{.Version}}' 2>/dev/null || true; }
helm_current() { [ "$(helm_version "$1")" = "$HELM_VERSION" ]; }

ldflags="-s -w"
ldflags+=" -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  ldflags+=" -X $pkg.k8sVersionMajor=$K8S_MAJOR -X $pkg.k8sVersionMinor=$K8S_MINOR"
done
go_tool HELM helm "$HELM_VERSION" "$HELM_GO" helm.sh/helm/v3/cmd/helm "$ldflags" helm_current
echo "install-helm: helm $(helm_version "$TOOL_BIN") at $TOOL_BIN"
