#!/usr/bin/env bash
# Everything the test suite needs besides npm packages, in one step (`npm test` and .ci/run run it):
#   scripts/install-deps.sh  PostgreSQL, nats-server, git, Go, Java, Maven and Chromium, from Debian when missing
#   scripts/install-helm.sh  helm, built from the Go module proxy (or $HELM)
#   scripts/install-kube.sh  kube-apiserver and etcd, built from the Go module proxy
#                            (or $KOLLECT_KUBE_APISERVER and $KOLLECT_ETCD)
#   scripts/install-versitygw.sh  versitygw, the S3 server of the s3 sink tests, from the Go module proxy (or $VERSITYGW)
#   scripts/install-kafka.sh      the Apache Kafka broker's jars, from Maven Central (or $KOLLECT_KAFKA_LIB)
#   scripts/install-actionlint.sh actionlint, the GitHub workflow linter, from the Go module proxy (or $ACTIONLINT)
#   scripts/install-promtool.sh   promtool, which checks the chart's alerting rules, from the Go module proxy (or $PROMTOOL)
#   scripts/install-gitea.sh      Gitea, the forge of the review-mode tests, from the Go module proxy (or $GITEA)
# Each step is idempotent and prints what it uses. Built tools are cached outside the clone
# (${KOLLECT_TOOLS_DIR:-$HOME/.cache/kollect-tools}), keyed by version: a warm run builds nothing.
#
# The Debian packages come first (they bring Go and Maven); the tools then build side by side.
# A cold run is mostly module downloads and single-threaded links, which overlap well, and every
# build shares one Go build and module cache, so a package two tools need at one version is
# compiled once. Each tool's lines carry its name, and a table of times per tool ends the run.
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
bash scripts/install-deps.sh
echo "install-test-tools: system packages ready in $((SECONDS - start)) s"

times="$(mktemp -d)"
trap 'rm -rf "$times"' EXIT
pids=()
# tool NAME: run scripts/install-NAME.sh in the background, its lines prefixed with the name, and
# record its exit status and seconds in $times/NAME.
tool() {
  (
    local t0=$SECONDS rc
    set +e
    bash "scripts/install-$1.sh" 2>&1 | sed -u "s/^/[$1] /"
    rc=${PIPESTATUS[0]}
    echo "$rc $((SECONDS - t0))" >"$times/$1"
    exit "$rc"
  ) &
  pids+=($!)
}
# The longest build starts first.
for name in kube gitea promtool helm versitygw actionlint kafka; do
  tool "$name"
done
failed=0
for pid in "${pids[@]}"; do
  wait "$pid" || failed=1
done

echo "install-test-tools: seconds per tool (built side by side, so they overlap):"
for f in "$times"/*; do
  read -r rc secs <"$f"
  printf '  %-11s %5s s%s\n' "$(basename "$f")" "$secs" "$([ "$rc" = 0 ] || echo "  FAILED (exit $rc)")"
done
[ "$failed" = 0 ] || { echo "install-test-tools: a tool failed to install; its lines above say why" >&2; exit 1; }
echo "install-test-tools: ready in $((SECONDS - start)) s"
