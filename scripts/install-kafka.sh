#!/usr/bin/env bash
# The Apache Kafka broker for the Kafka sink tests (test/support/kafka.ts starts it in KRaft mode,
# one node, on loopback ports): the jars of test/kafka/pom.xml, copied from Maven Central by Maven
# into
#   ${KOLLECT_TOOLS_DIR:-$HOME/.cache/kollect-tools}/kafka-<version>/lib/
# unless they are already there. Maven's own cache (~/.m2) keeps the downloads. KOLLECT_KAFKA_LIB
# points at a prebuilt jar directory instead.
#
#   scripts/install-kafka.sh                fetch if missing, then print what is used
#   scripts/install-kafka.sh --print-paths  only print KOLLECT_KAFKA_LIB=dir (what the tests read)
set -euo pipefail
cd "$(dirname "$0")/.."
KOLLECT_TOOLS_DIR="${KOLLECT_TOOLS_DIR:-$HOME/.cache/kollect-tools}"

# Keep in step with <kafka.version> in test/kafka/pom.xml.
KAFKA_VERSION=4.1.1
LIB_DIR="${KOLLECT_KAFKA_LIB:-$KOLLECT_TOOLS_DIR/kafka-$KAFKA_VERSION/lib}"

if [ "${1:-}" = "--print-paths" ]; then
  echo "KOLLECT_KAFKA_LIB=$LIB_DIR"
  exit 0
fi

grep -q "<kafka.version>$KAFKA_VERSION</kafka.version>" test/kafka/pom.xml \
  || { echo "install-kafka: test/kafka/pom.xml does not pin Kafka $KAFKA_VERSION" >&2; exit 1; }

jar="$LIB_DIR/kafka_2.13-$KAFKA_VERSION.jar"
if [ -n "${KOLLECT_KAFKA_LIB:-}" ]; then
  [ -f "$jar" ] || { echo "install-kafka: KOLLECT_KAFKA_LIB=$LIB_DIR holds no kafka_2.13-$KAFKA_VERSION.jar" >&2; exit 1; }
elif [ ! -f "$LIB_DIR/.complete" ]; then
  command -v mvn >/dev/null || { echo "install-kafka: mvn is not installed (scripts/install-deps.sh installs Debian's maven)" >&2; exit 1; }
  echo "install-kafka: fetching Kafka $KAFKA_VERSION jars into $LIB_DIR"
  # Into a temporary directory first, so an interrupted copy is never taken for a complete one.
  tmp="$(mktemp -d "$KOLLECT_TOOLS_DIR/.kafka-XXXXXX" 2>/dev/null || { mkdir -p "$KOLLECT_TOOLS_DIR" && mktemp -d "$KOLLECT_TOOLS_DIR/.kafka-XXXXXX"; })"
  trap 'rm -rf "$tmp"' EXIT
  mvn -q -B -f test/kafka/pom.xml dependency:copy-dependencies -DoutputDirectory="$tmp/lib"
  touch "$tmp/lib/.complete"
  rm -rf "$LIB_DIR"
  mkdir -p "$(dirname "$LIB_DIR")"
  mv "$tmp/lib" "$LIB_DIR"
fi

echo "install-kafka: Kafka $KAFKA_VERSION, $(find "$LIB_DIR" -name '*.jar' | wc -l) jars at $LIB_DIR ($(java -version 2>&1 | head -1))"
