import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { FastifyInstance } from 'fastify'
import { loadConfig, type Config } from '../../server/process/config.js'
import { createPluralResolver } from '../../server/cluster/discovery.js'
import { createExporter } from '../../server/exporter-wiring.js'
import { buildHooksApp } from '../../server/http/hooks-app.js'
import { httpExporterClient } from '../../server/exporter-api/client.js'
import { createLogger, type Logger } from '../../server/process/logger.js'
import { createMetrics, type Metrics } from '../../server/process/metrics.js'
import { enableLinearRegExps } from '../../server/process/regexp-engine.js'
import type { Exporter } from '../../exporter/index.js'
import type { ExporterClient, InventoryStatus, ProfileStatus, SinkStatus, TargetStatus } from '../../api/types.js'
import type { RawResponse } from './http-post.js'

export { post, readResponse, type RawResponse } from './http-post.js'

export interface HooksServer {
  url: string
  config: Config
  exporter: Exporter
  metrics: Metrics
  app: FastifyInstance
  dataDir: string
  close(): Promise<void>
}

/**
 * A real listening hooks server with an in-process exporter, on a random loopback port. Without
 * a token in env it runs with KOLLECT_HOOK_AUTH=none; auth tests pass KOLLECT_HOOK_TOKEN.
 * beforeListen may add routes, as a later change to the app would.
 */
export async function startHooksServer(env: Record<string, string> = {}, opts: { beforeListen?: (app: FastifyInstance) => void } = {}): Promise<HooksServer> {
  let exporter: Exporter | undefined
  const server = await listenHooks(env, (config, logger, metrics) => (exporter = createExporter(config, logger, metrics, env)), opts)
  const held = exporter as Exporter
  return {
    ...server,
    exporter: held,
    // The app stops taking hooks before its exporter closes, and the data directory goes last.
    close: async () => {
      await server.app.close()
      await held.close()
      rmSync(server.dataDir, { recursive: true, force: true })
    },
  }
}

/** The same with the exporter in a process of its own, as in the pod (the hooks container and the exporter sidecar). */
export async function startHooksServerWith(exporterUrl: string, env: Record<string, string> = {}): Promise<Omit<HooksServer, 'exporter'>> {
  return listenHooks(env, (config) => httpExporterClient(exporterUrl, config.hookAuth))
}

type ExporterFor = (config: Config, logger: Logger, metrics: Metrics) => ExporterClient

async function listenHooks(env: Record<string, string>, exporterFor: ExporterFor, opts: { beforeListen?: (app: FastifyInstance) => void } = {}): Promise<Omit<HooksServer, 'exporter'>> {
  // This test process is the server's entry point, so it does what main-dev does.
  enableLinearRegExps()
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'kollect-hooks-'))
  const auth = env['KOLLECT_HOOK_TOKEN'] !== undefined || env['KOLLECT_HOOK_TOKEN_FILE'] !== undefined ? {} : { KOLLECT_HOOK_AUTH: 'none' }
  const config = loadConfig({ KOLLECT_DATA_DIR: dataDir, PORT: '0', KOLLECT_LOG_LEVEL: 'silent', KOLLECT_ALLOW_PRIVATE_SINKS: 'true', ...auth, ...env }, { host: '127.0.0.1' })
  const logger = createLogger(config.logLevel, 'kollect-test')
  const metrics = createMetrics()
  const exporter = exporterFor(config, logger, metrics)
  const app = await buildHooksApp({ config, logger, metrics, exporter, resolvePlural: createPluralResolver(null) })
  opts.beforeListen?.(app)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  const port = typeof address === 'object' && address ? address.port : 0
  return {
    url: `http://127.0.0.1:${port}`,
    config,
    metrics,
    app,
    dataDir,
    close: async () => {
      await app.close()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

/**
 * A hook answer's status. Every status field is optional and the kinds agree on the fields they
 * share, so one type reads them all; which fields a route writes is the test's to assert.
 */
export type AnyStatus = TargetStatus & InventoryStatus & ProfileStatus & SinkStatus

export function statusOf(res: RawResponse): AnyStatus {
  return (res.json() as { status: AnyStatus }).status
}

export async function get(url: string): Promise<RawResponse> {
  const res = await fetch(url)
  const text = await res.text()
  return { status: res.status, headers: Object.fromEntries(res.headers), text, json: () => JSON.parse(text) }
}

/**
 * Two servers for the same syncs: one keeps object records for incremental syncs, the other does
 * not (KOLLECT_OBJECT_CACHE_BYTES=0). Neither reuses unchanged answers, so a repeated body reaches
 * the incremental path. A suite runs start() before its tests and close() after them.
 */
export function keptAndPlain<S extends { close(): Promise<void> }>(
  start: (env: Record<string, string>) => Promise<S>,
): { kept: S; plain: S; start(): Promise<void>; close(): Promise<void> } {
  const servers = {
    start: async () => {
      servers.kept = await start({ KOLLECT_UNCHANGED_SYNCS: '0' })
      servers.plain = await start({ KOLLECT_UNCHANGED_SYNCS: '0', KOLLECT_OBJECT_CACHE_BYTES: '0' })
    },
    close: async () => {
      await servers.kept?.close()
      await servers.plain?.close()
    },
  } as { kept: S; plain: S; start(): Promise<void>; close(): Promise<void> }
  return servers
}
