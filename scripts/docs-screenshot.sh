#!/usr/bin/env bash
# Builds the documentation site, serves it on a loopback port and takes a screenshot of the home
# page with Debian's headless Chromium (installed when missing; not part of CI), so a broken
# theme, base path or empty hero is seen before a release. Prints the PNG's path.
# Usage: scripts/docs-screenshot.sh [out.png]   (default /tmp/kollect-docs-home.png)
# KOLLECT_DOCS_BASE, if set, is honoured by the build and by the served URL.
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-/tmp/kollect-docs-home.png}"
port="${DOCS_SCREENSHOT_PORT:-4179}"
base="/${KOLLECT_DOCS_BASE:-}/"
base="$(tr -s / <<<"$base")"

if ! command -v chromium >/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get install -y chromium >&2 || { $sudo apt-get update >&2 && $sudo apt-get install -y chromium >&2; }
fi

url="http://127.0.0.1:$port$base"
# A server left on the port would answer with an older build: refuse rather than photograph it.
if curl -fsS -o /dev/null "$url" 2>/dev/null; then
  echo "docs-screenshot: something already serves $url; stop it or set DOCS_SCREENSHOT_PORT" >&2
  exit 1
fi

npm run --silent docs:build >&2
# The pinned node runs the server itself (no npx wrapper), so $! is the process to stop.
node_modules/.bin/node node_modules/vitepress/bin/vitepress.js preview docs --host 127.0.0.1 --port "$port" --strictPort >/dev/null 2>&1 &
server=$!
profile="$(mktemp -d)"
trap 'kill "$server" 2>/dev/null || true; rm -rf "$profile"' EXIT

for _ in $(seq 1 100); do
  kill -0 "$server" 2>/dev/null || { echo "docs-screenshot: the preview server exited" >&2; exit 1; }
  curl -fsS -o /dev/null "$url" 2>/dev/null && break
  sleep 0.2
done
curl -fsS -o /dev/null "$url" || { echo "docs-screenshot: nothing serves $url" >&2; exit 1; }

rm -f "$out"
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --window-size=1280,900 --screenshot="$out" "$url" >&2 2>/dev/null || true
[ -s "$out" ] || { echo "docs-screenshot: chromium wrote no screenshot" >&2; exit 1; }
echo "$out"
