import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import type { ExporterClient, InventoryComposition, ObjectRef, ResolvedSink, TargetReport } from '../api/types.js'
import { authHeader, authorized, type HookAuth } from './auth.js'
import { KollectError, errorBody } from './errors.js'
import { HTTP_TIMEOUTS } from './http-timeouts.js'
import { jsonBodyParser } from './json-depth.js'
import type { Logger } from './logger.js'
import type { Metrics } from './metrics.js'

// The exporter sidecar's API: the hooks container is its only client, over loopback, with the
// same authentication. Paths mirror the ExporterClient methods one to one.
export const EXPORTER_ROUTES = {
  reportTarget: '/v1/targets/report',
  removeTarget: '/v1/targets/remove',
  applyInventory: '/v1/inventories/apply',
  finalizeInventory: '/v1/inventories/finalize',
  checkSink: '/v1/sinks/check',
} as const

export async function buildExporterApp(deps: { exporter: ExporterClient; auth: HookAuth; bodyLimit: number; maxJsonDepth: number; logger: Logger; metrics: Metrics }): Promise<FastifyInstance> {
  const app = Fastify({ loggerInstance: deps.logger as FastifyBaseLogger, bodyLimit: deps.bodyLimit, ...HTTP_TIMEOUTS })
  // The same bounded parser as the hooks: nothing reaches the exporter's state unparsed or too deep.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, jsonBodyParser(deps.maxJsonDepth))
  app.addHook('onRequest', async (request) => {
    if (request.url.startsWith('/v1/') && !authorized(request.headers.authorization, deps.auth)) throw new KollectError('KOLLECT_ERR_HOOK_UNAUTHORIZED')
  })
  app.setErrorHandler((error: Error & { statusCode?: number }, request, reply) => {
    const status = error instanceof KollectError ? error.statusCode : error.statusCode && error.statusCode < 500 ? error.statusCode : 500
    if (status >= 500) request.log.error({ err: error }, 'exporter request failed')
    void reply.code(status).send(error instanceof KollectError ? errorBody(error) : { code: 'KOLLECT_ERR_INTERNAL', message: status >= 500 ? 'internal error' : error.message })
  })
  const e = deps.exporter
  app.post(EXPORTER_ROUTES.reportTarget, { logLevel: 'warn' }, async (req) => { await e.reportTarget(req.body as TargetReport); return {} })
  app.post(EXPORTER_ROUTES.removeTarget, { logLevel: 'warn' }, async (req) => { await e.removeTarget(req.body as ObjectRef); return {} })
  app.post(EXPORTER_ROUTES.applyInventory, { logLevel: 'warn' }, async (req) => e.applyInventory(req.body as InventoryComposition))
  app.post(EXPORTER_ROUTES.finalizeInventory, { logLevel: 'warn' }, async (req) => e.finalizeInventory(req.body as InventoryComposition))
  app.post(EXPORTER_ROUTES.checkSink, { logLevel: 'warn' }, async (req) => e.checkSink(req.body as ResolvedSink))
  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/metrics', async (_request, reply) => reply.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics()))
  return app
}

/** The hooks container's side of the seam. */
export function httpExporterClient(baseUrl: string, auth: HookAuth, timeoutMs = 8000): ExporterClient & { ping(): Promise<boolean>; metrics(): Promise<string> } {
  const call = async <T>(route: string, body: unknown): Promise<T> => {
    const res = await fetch(baseUrl + route, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...authHeader(auth) },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    })
    const text = await res.text()
    if (!res.ok) throw new Error(`exporter answered ${res.status}: ${text.slice(0, 200)}`)
    return JSON.parse(text) as T
  }
  return {
    reportTarget: (r) => call(EXPORTER_ROUTES.reportTarget, r),
    removeTarget: (t) => call(EXPORTER_ROUTES.removeTarget, t),
    applyInventory: (c) => call(EXPORTER_ROUTES.applyInventory, c),
    finalizeInventory: (c) => call(EXPORTER_ROUTES.finalizeInventory, c),
    checkSink: (sink) => call(EXPORTER_ROUTES.checkSink, sink),
    ping: async () => (await fetch(baseUrl + '/healthz', { signal: AbortSignal.timeout(2000) })).ok,
    metrics: async () => {
      const res = await fetch(baseUrl + '/metrics', { signal: AbortSignal.timeout(2000) })
      return res.ok ? res.text() : ''
    },
  }
}
