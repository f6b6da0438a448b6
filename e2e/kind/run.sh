#!/usr/bin/env bash
# Kollect end to end on a real cluster: kind + Metacontroller + this repository's image and
# Helm chart, then the sample CRs against a demo Deployment, down to the exported Git commit.
# See README.md. KEEP=1 keeps the cluster (and reuses it on the next run).
set -euo pipefail
cd "$(dirname "$0")/../.."

CLUSTER="${CLUSTER:-kollect-e2e}"
METACONTROLLER_VERSION="${METACONTROLLER_VERSION:-v4.17.2}"
IMAGE="kollect:e2e"
NS=kollect-system
TEAM=team-a
KEEP="${KEEP:-0}"
CTX="kind-$CLUSTER"
REPO_IN_POD=/data/sinks/$TEAM/git-demo
SNAPSHOT=inventory/lab-west/$TEAM/prod-inventory.json   # examples/crs/sink-git.yaml: cluster lab-west

log() { printf '\n== %s\n' "$*"; }
k() { kubectl --context "$CTX" "$@"; }
in_exporter() { k exec -n "$NS" deploy/kollect -c exporter -- "$@"; }

for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { echo "e2e/kind: $tool is required (see e2e/kind/README.md)" >&2; exit 1; }
done
# $HELM if set, else the pinned build in the tools cache (built when missing).
bash scripts/install-helm.sh
HELM="$(bash scripts/install-helm.sh --print-paths | sed -n 's/^HELM=//p')"

diagnose() {
  echo "---- diagnostics ----"
  k get pods -A -o wide || true
  k get kollect -A -o wide || true
  k get compositecontrollers -o wide || true
  k describe pods -n "$NS" || true
  k logs -n "$NS" deploy/kollect -c hooks --tail=100 || true
  k logs -n "$NS" deploy/kollect -c exporter --tail=100 || true
  k logs -n metacontroller statefulset/metacontroller --tail=100 || true
  k get kinv/prod-inventory -n "$TEAM" -o yaml || true
}

finish() {
  local rc=$?
  [ "$rc" = 0 ] || diagnose
  if [ "$KEEP" = 1 ]; then
    echo "KEEP=1: cluster $CLUSTER kept (kubectl --context $CTX ...; kind delete cluster --name $CLUSTER)"
  else
    kind delete cluster --name "$CLUSTER" || true
  fi
  [ "$rc" = 0 ] && echo "e2e/kind: PASS" || echo "e2e/kind: FAIL ($rc)"
}
trap finish EXIT

log "cluster $CLUSTER"
if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  echo "reusing the existing cluster"
else
  kind create cluster --name "$CLUSTER" --wait 120s
fi

log "Metacontroller $METACONTROLLER_VERSION"
k apply -k "https://github.com/metacontroller/metacontroller/manifests/production?ref=$METACONTROLLER_VERSION"
k rollout status statefulset/metacontroller -n metacontroller --timeout=180s

log "image $IMAGE"
docker build -t "$IMAGE" .
kind load docker-image "$IMAGE" --name "$CLUSTER"

log "hook token and chart"
k create namespace "$NS" --dry-run=client -o yaml | k apply -f -
if ! k get secret kollect-hook-token -n "$NS" >/dev/null 2>&1; then
  k create secret generic kollect-hook-token -n "$NS" \
    --from-literal=token="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
fi
"$HELM" --kube-context "$CTX" upgrade --install kollect charts/kollect -n "$NS" \
  --set image.repository=kollect --set image.tag=e2e --set image.pullPolicy=Never \
  --set hookToken.create=false --set hookToken.existingSecret=kollect-hook-token \
  --set cluster=kind-e2e \
  --wait --timeout 3m
k rollout status deploy/kollect -n "$NS" --timeout=120s

log "demo workload in $TEAM"
k create namespace "$TEAM" --dry-run=client -o yaml | k apply -f -
# One demo Deployment: $1 its name (also its app label and container), $2 its labels as the
# entries of a YAML flow map.
demo_deployment() {
  cat <<YAML
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1, labels: {$2}}
spec:
  replicas: 1
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec: {containers: [{name: $1, image: registry.k8s.io/pause:3.10}]}
YAML
}
# web and shop are selected (tier=frontend); tmp-web is excluded by the target's matchPolicy;
# api is not a frontend.
{
  demo_deployment web 'tier: frontend, team: web'
  demo_deployment shop 'tier: frontend'
  demo_deployment tmp-web 'tier: frontend'
  demo_deployment api 'tier: backend'
} | k apply -n "$TEAM" -f -

log "Kollect resources (examples/crs)"
k apply -k examples/crs
k wait --for=condition=Synced kinv/prod-inventory -n "$TEAM" --timeout=180s
k get kollect -n "$TEAM" -o wide

log "exported Git snapshot"
in_exporter git -C "$REPO_IN_POD" log --stat
snapshot="$(in_exporter git -C "$REPO_IN_POD" show "HEAD:$SNAPSHOT")"
for want in '"name": "web"' '"name": "shop"' '"schemaVersion"' '"checksum"'; do
  grep -qF "$want" <<<"$snapshot" || { echo "snapshot lacks $want" >&2; exit 1; }
done
for unwanted in '"name": "tmp-web"' '"name": "api"'; do
  if grep -qF "$unwanted" <<<"$snapshot"; then echo "snapshot must not contain $unwanted" >&2; exit 1; fi
done
in_exporter git -C "$REPO_IN_POD" log -1 --format=%B | grep -q '^Kollect-Checksum: ' \
  || { echo "last commit has no Kollect-Checksum trailer" >&2; exit 1; }

log "a live change becomes a new commit"
commits="$(in_exporter git -C "$REPO_IN_POD" rev-list --count HEAD)"
k scale deploy/web -n "$TEAM" --replicas=2
deadline=$((SECONDS + 120))
until [ "$(in_exporter git -C "$REPO_IN_POD" rev-list --count HEAD)" -gt "$commits" ]; do
  [ "$SECONDS" -lt "$deadline" ] || { echo "no new commit 120s after scaling web" >&2; exit 1; }
  sleep 3
done
in_exporter git -C "$REPO_IN_POD" log -1 --stat

log "finalize: deleting the inventory completes"
k delete kinv/prod-inventory -n "$TEAM" --timeout=120s
