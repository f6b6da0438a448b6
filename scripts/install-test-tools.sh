#!/usr/bin/env bash
# Everything the test suite needs besides npm packages, in one step (`npm test` and .ci/run run it):
#   scripts/install-deps.sh  PostgreSQL, nats-server, git and Go, from Debian when missing
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
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
bash scripts/install-deps.sh
bash scripts/install-helm.sh
bash scripts/install-kube.sh
bash scripts/install-versitygw.sh
bash scripts/install-promtool.sh
bash scripts/install-kafka.sh
bash scripts/install-actionlint.sh
bash scripts/install-gitea.sh
echo "install-test-tools: ready in $((SECONDS - start)) s"
