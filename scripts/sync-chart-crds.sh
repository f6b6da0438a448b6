#!/usr/bin/env bash
# The chart's CRDs (charts/kollect/crds/) are byte-identical copies of manifests/crds/, the one
# source of truth; test/deploy/manifests.test.ts fails when they drift. Run this after changing
# a CRD. --check only reports drift (exit 1) and changes nothing. templates/crds.yaml
# (crds.install=true) reads these same files, so there is no third copy to keep in step.
#
# kustomization.yaml is not copied: Helm would send every file in crds/ to the API server.
set -euo pipefail
cd "$(dirname "$0")/.."

src=manifests/crds
dst=charts/kollect/crds
check=false
[ "${1:-}" = "--check" ] && check=true

shopt -s nullglob
sources=()
for f in "$src"/*.yaml; do
  [ "$(basename "$f")" = kustomization.yaml ] || sources+=("$f")
done
[ ${#sources[@]} -gt 0 ] || { echo "sync-chart-crds: no CRDs in $src" >&2; exit 1; }

if $check; then
  drift=0
  for f in "${sources[@]}"; do
    cmp -s "$f" "$dst/$(basename "$f")" || { echo "differs or missing: $dst/$(basename "$f")"; drift=1; }
  done
  for f in "$dst"/*.yaml; do
    [ -e "$src/$(basename "$f")" ] || { echo "not in $src: $f"; drift=1; }
  done
  [ $drift = 0 ] && echo "chart CRDs match $src"
  exit $drift
fi

mkdir -p "$dst"
rm -f "$dst"/*.yaml
cp "${sources[@]}" "$dst"/
echo "copied ${#sources[@]} CRDs from $src to $dst"
