import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import { kubernetesKeywords } from '../../api/crd-schemas.js'
import type { ExporterClient, InventoryComposition, ObjectRef, ReportResult, ResolvedSink, TargetReport } from '../../api/types.js'
import { authHeader, type HookAuth } from '../guards/auth.js'
import { apiAuth, isOpenRoute } from '../http/plugins/api-auth.js'
import { HTTP_TIMEOUTS } from '../http/timeouts.js'
import { QUIET_ROUTE, QuietProbes, type Logger } from '../process/logger.js'
import type { Metrics } from '../process/metrics.js'
import { KollectError, errorBody } from '../protocol/errors.js'
import { jsonBodyParser } from '../protocol/json-depth.js'
import { inventoryCompositionSchema, removedTargetSchema, resolvedSinkSchema, targetReportSchema } from './schemas.js'

// The exporter sidecar's API: the hooks container is its only client, over loopback, with the
// same authentication. Paths mirror the ExporterClient methods one to one.
export const EXPORTER_ROUTES = {
  reportTarget: '/v1/targets/report',
  removeTarget: '/v1/targets/remove',
  applyInventory: '/v1/inventories/apply',
  finalizeInventory: '/v1/inventories/finalize',
  checkSink: '/v1/sinks/check',
} as const

/** The exporter's role on every API answer: `active` (it writes to sinks) or `standby`. */
export const EXPORTER_ROLE_HEADER = 'kollect-exporter-role'

export type ExporterRole = 'active' | 'standby' | 'unknown'

export interface ExporterAppDeps {
  exporter: ExporterClient
  auth: HookAuth
  /** Largest body of the routes other than reports. */
  bodyLimit: number
  /** Largest report body: see reportBodyLimit. */
  reportBodyLimit: number
  maxJsonDepth: number
  logger: Logger
  metrics: Metrics
  /** Whether this exporter writes to sinks (false: a leader-election standby); ready when left out. */
  ready?: () => boolean
}

/**
 * A report is charged at least its JSON length (exporter/budget.ts), so one whose body exceeds the
 * namespace share could never be held: it is refused before it is read. The MiB on top is room
 * for the envelope and failedKeys, which are not charged.
 */
export function reportBodyLimit(namespaceShareBytes: number): number {
  return namespaceShareBytes + 1024 * 1024
}

export async function buildExporterApp(deps: ExporterAppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    logController: new QuietProbes(),
    bodyLimit: deps.bodyLimit,
    ...HTTP_TIMEOUTS,
    // As the hooks: no coercion, nothing removed, and no CRD default filled into a sink spec, so
    // the exporter gets the body as sent or a 400. Not strict, as for the CRD schemas (int64 formats).
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false, strict: false }, plugins: [kubernetesKeywords] },
  })
  // The same bounded parser as the hooks: nothing reaches the exporter's state unparsed or too deep.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, jsonBodyParser(deps.maxJsonDepth))
  // The same guard as the hooks, on the route matched, not the request-target: `/%76%31/…` is `/v1/…`.
  await app.register(apiAuth, { auth: deps.auth })
  // With KOLLECT_EXPORTER_PEERS the hooks call every replica and take the active one's answer.
  app.addHook('onSend', async (request, reply) => {
    if (!request.is404 && !isOpenRoute(request)) void reply.header(EXPORTER_ROLE_HEADER, (deps.ready?.() ?? true) ? 'active' : 'standby')
  })
  app.setErrorHandler((error: Error & { code?: string; statusCode?: number; validation?: unknown }, request, reply) => {
    const known = error instanceof KollectError ? error
      : error.code === 'FST_ERR_CTP_BODY_TOO_LARGE' ? new KollectError('KOLLECT_ERR_HOOK_BODY_TOO_LARGE', String(request.routeOptions.bodyLimit ?? deps.bodyLimit))
        : error.validation ? new KollectError('KOLLECT_ERR_EXPORTER_BAD_REQUEST', error.message)
          : null
    const status = known ? known.statusCode : error.statusCode && error.statusCode < 500 ? error.statusCode : 500
    if (status >= 500) request.log.error({ err: error }, 'exporter request failed')
    void reply.code(status).send(known ? errorBody(known) : { code: 'KOLLECT_ERR_INTERNAL', message: status >= 500 ? 'internal error' : error.message })
  })
  const e = deps.exporter
  const composition = inventoryCompositionSchema()
  app.post<{ Body: TargetReport }>(EXPORTER_ROUTES.reportTarget, { logLevel: 'warn', bodyLimit: deps.reportBodyLimit, schema: { body: targetReportSchema } }, async (req) => e.reportTarget(req.body))
  app.post<{ Body: ObjectRef & { uid?: string } }>(EXPORTER_ROUTES.removeTarget, { logLevel: 'warn', schema: { body: removedTargetSchema } }, async (req) => { await e.removeTarget(req.body); return {} })
  app.post<{ Body: InventoryComposition }>(EXPORTER_ROUTES.applyInventory, { logLevel: 'warn', schema: { body: composition } }, async (req) => e.applyInventory(req.body))
  app.post<{ Body: InventoryComposition }>(EXPORTER_ROUTES.finalizeInventory, { logLevel: 'warn', schema: { body: composition } }, async (req) => e.finalizeInventory(req.body))
  app.post<{ Body: ResolvedSink }>(EXPORTER_ROUTES.checkSink, { logLevel: 'warn', schema: { body: resolvedSinkSchema() } }, async (req) => e.checkSink(req.body))
  app.get('/healthz', QUIET_ROUTE, async () => ({ status: 'ok' }))
  // A standby is alive and takes reports, but it is not the exporter that writes.
  app.get('/readyz', QUIET_ROUTE, async (_request, reply) => {
    const ok = deps.ready?.() ?? true
    return reply.code(ok ? 200 : 503).send({ status: ok ? 'ready' : 'standby' })
  })
  app.get('/metrics', QUIET_ROUTE, async (_request, reply) => reply.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics()))
  return app
}

/** What one exporter replica answered, and the role it said it has. */
export interface RoleAnswer<T> { value: T; role: ExporterRole }

/** The state-carrying calls, which KOLLECT_EXPORTER_PEERS sends to every replica. */
export type StateCall = 'reportTarget' | 'removeTarget' | 'applyInventory' | 'finalizeInventory'

/**
 * One exporter replica's API, each answer with the replica's role. A state call may carry its
 * argument already serialised (`body`), so a fan-out serialises a large report once for every replica.
 */
export type RoleAwareClient = { [K in StateCall]: (arg: Parameters<ExporterClient[K]>[0], body?: string) => Promise<RoleAnswer<Awaited<ReturnType<ExporterClient[K]>>>> } & {
  checkSink: ExporterClient['checkSink']
  ping(): Promise<boolean>
  metrics(): Promise<string>
}

export function roleAwareExporterClient(baseUrl: string, auth: HookAuth, timeoutMs = 8000): RoleAwareClient {
  const post = async (route: string, body: string) => {
    const res = await fetch(baseUrl + route, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...authHeader(auth) },
      body,
      signal: AbortSignal.timeout(timeoutMs),
    })
    const header = res.headers.get(EXPORTER_ROLE_HEADER)
    const role: ExporterRole = header === 'active' || header === 'standby' ? header : 'unknown'
    return { ok: res.ok, status: res.status, text: await res.text(), role }
  }
  const call = async <T>(route: string, arg: unknown, body = JSON.stringify(arg)): Promise<RoleAnswer<T>> => {
    const res = await post(route, body)
    if (!res.ok) throw new Error(`exporter answered ${res.status}: ${res.text.slice(0, 200)}`)
    return { value: JSON.parse(res.text) as T, role: res.role }
  }
  const report = async (r: TargetReport, body = JSON.stringify(r)): Promise<RoleAnswer<ReportResult>> => {
    const res = await post(EXPORTER_ROUTES.reportTarget, body)
    if (res.status === 413) {
      const reason = (JSON.parse(res.text) as { message?: string }).message
      return { value: { accepted: false, reason: 'ResourceLimit', message: `the exporter refused a report of ${r.items.length} items (${Buffer.byteLength(body)} bytes of JSON): ${reason}; split the target or trim the profile` }, role: res.role }
    }
    if (!res.ok) throw new Error(`exporter answered ${res.status}: ${res.text.slice(0, 200)}`)
    return { value: reportResultOf(JSON.parse(res.text) as Record<string, unknown>), role: res.role }
  }
  // One report in flight at a time: the exporter then parses at most one report body at once,
  // which is what its memory sizing assumes.
  let reports: Promise<unknown> = Promise.resolve()
  return {
    reportTarget: (r, body) => {
      const run = reports.then(() => report(r, body))
      reports = run.catch(() => undefined)
      return run
    },
    removeTarget: (t, body) => call(EXPORTER_ROUTES.removeTarget, t, body),
    applyInventory: (c, body) => call(EXPORTER_ROUTES.applyInventory, c, body),
    finalizeInventory: (c, body) => call(EXPORTER_ROUTES.finalizeInventory, c, body),
    checkSink: async (sink) => (await call<Awaited<ReturnType<ExporterClient['checkSink']>>>(EXPORTER_ROUTES.checkSink, sink)).value,
    ping: async () => (await fetch(baseUrl + '/healthz', { signal: AbortSignal.timeout(2000) })).ok,
    metrics: async () => {
      const res = await fetch(baseUrl + '/metrics', { signal: AbortSignal.timeout(2000) })
      return res.ok ? res.text() : ''
    },
  }
}

export type HttpExporterClient = ExporterClient & { ping(): Promise<boolean>; metrics(): Promise<string> }

/** The hooks container's side of the seam: one exporter (the sidecar, or the Service of the ready one). */
export function httpExporterClient(baseUrl: string, auth: HookAuth, timeoutMs = 8000): HttpExporterClient {
  const c = roleAwareExporterClient(baseUrl, auth, timeoutMs)
  return {
    reportTarget: async (r) => (await c.reportTarget(r)).value,
    removeTarget: async (t) => { await c.removeTarget(t) },
    applyInventory: async (x) => (await c.applyInventory(x)).value,
    finalizeInventory: async (x) => (await c.finalizeInventory(x)).value,
    checkSink: c.checkSink,
    ping: c.ping,
    metrics: c.metrics,
  }
}

/** The exporter's answer, rebuilt field by field: only what the contract names reaches status. */
function reportResultOf(r: Record<string, unknown>): ReportResult {
  if (r['accepted'] !== false) {
    const staleItems = Number(r['staleItems'])
    return Number.isInteger(staleItems) && staleItems > 0 ? { accepted: true, staleItems } : { accepted: true }
  }
  if (r['reason'] === 'Stale') {
    return { accepted: false, reason: 'Stale', message: String(r['message']), heldGeneration: Number(r['heldGeneration']) || 0, heldChecksum: String(r['heldChecksum'] ?? '') }
  }
  return { accepted: false, reason: 'ResourceLimit', message: String(r['message']) }
}
