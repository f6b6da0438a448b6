# One image, two processes (two containers of one pod):
#   hooks     (default)  node dist/server/main-hooks.js     Metacontroller's webhooks on :8080
#   exporter             node dist/server/main-exporter.js  the sidecar, on 127.0.0.1:8081 only
#   hub                  node dist/server/main-hub.js       hub mode: a fleet's NATS events into the hub's sinks
#
#   docker build -t kollect .
#   docker run --read-only --tmpfs /tmp --tmpfs /data -p 8080:8080 kollect   # hooks
#
# Runtime contract: runs as uid/gid 10001, root filesystem read-only; writable data lives in
# /data (KOLLECT_DATA_DIR: the embedded Git repository, file sinks, Git clones) and /tmp (HOME,
# git's scratch space). In Kubernetes both are volumes (manifests/deployment.yaml).

# ---- build: compile TypeScript, then drop dev dependencies ----
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

# ---- runtime ----
FROM node:24-bookworm-slim
# git: the git sink shells out to it (https remotes; no ssh client is installed).
# ca-certificates: TLS to Git remotes, PostgreSQL and NATS.
# tini: PID 1 that forwards SIGTERM to node and reaps orphaned git helpers.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends git ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 kollect \
 && useradd --uid 10001 --gid 10001 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin kollect \
 && mkdir -p /data \
 && chown 10001:10001 /data

WORKDIR /app
# package.json carries "type": "module", which the compiled dist/**/*.js need.
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/api ./dist/api
COPY --from=build /app/dist/hooks ./dist/hooks
COPY --from=build /app/dist/server ./dist/server
COPY --from=build /app/dist/exporter ./dist/exporter
COPY --from=build /app/dist/sinks ./dist/sinks
COPY --from=build /app/dist/hub ./dist/hub
# kollect validate / preview, for kubectl exec and CI images.
COPY --from=build /app/dist/cli ./dist/cli
# api/crd-schemas.ts reads the CRDs at runtime: it searches upward from dist/api/ for
# manifests/crds and finds /app/manifests/crds (KOLLECT_CRD_DIR would override the search).
COPY manifests/crds ./manifests/crds

ENV NODE_ENV=production \
    NODE_OPTIONS=--max-semi-space-size=32 \
    HOME=/tmp \
    KOLLECT_DATA_DIR=/data \
    PORT=8080

USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["/usr/bin/tini", "--"]
# The exporter container sets args: ["node", "dist/server/main-exporter.js"] (tini stays PID 1).
CMD ["node", "dist/server/main-hooks.js"]
