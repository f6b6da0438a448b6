import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import { kubernetesKeywords } from '../../api/crd-schemas.js'
import type { ExporterClient, HeldReport, InventoryComposition, ObjectRef, ResolvedSink, TargetReport } from '../../api/types.js'
import type { HookAuth } from '../guards/auth.js'
import { apiAuth, isOpenRoute } from '../http/plugins/api-auth.js'
import { HTTP_TIMEOUTS } from '../http/timeouts.js'
import { QUIET_ROUTE, QuietRequests, type Logger } from '../process/logger.js'
import type { Metrics } from '../process/metrics.js'
import { KollectError, errorBody } from '../protocol/errors.js'
import { jsonBodyParser } from '../protocol/json-depth.js'
import { EXPORTER_ROLE_HEADER, EXPORTER_ROUTES } from './routes.js'
import { heldReportSchema, inventoryCompositionSchema, removedTargetSchema, resolvedSinkSchema, targetReportSchema } from './schemas.js'

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
    logController: new QuietRequests(),
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
    const tooLarge = () => new KollectError('KOLLECT_ERR_HOOK_BODY_TOO_LARGE', String(request.routeOptions.bodyLimit ?? deps.bodyLimit))
    const known = error instanceof KollectError ? error
      : error.code === 'FST_ERR_CTP_BODY_TOO_LARGE' ? tooLarge()
        : error.validation ? new KollectError('KOLLECT_ERR_EXPORTER_BAD_REQUEST', error.message)
          : null
    const status = known ? known.statusCode : error.statusCode && error.statusCode < 500 ? error.statusCode : 500
    if (status >= 500) request.log.error({ err: error }, 'exporter request failed')
    void reply.code(status).send(known ? errorBody(known) : { code: 'KOLLECT_ERR_INTERNAL', message: status >= 500 ? 'internal error' : error.message })
  })
  const e = deps.exporter
  const composition = inventoryCompositionSchema()
  app.post<{ Body: TargetReport }>(EXPORTER_ROUTES.reportTarget, { logLevel: 'warn', bodyLimit: deps.reportBodyLimit, schema: { body: targetReportSchema } },
    async (req) => e.reportTarget(req.body))
  app.post<{ Body: HeldReport }>(EXPORTER_ROUTES.holdsReport, { logLevel: 'warn', schema: { body: heldReportSchema } },
    async (req) => ({ held: await e.holdsReport(req.body) }))
  app.post<{ Body: ObjectRef & { uid?: string } }>(EXPORTER_ROUTES.removeTarget, { logLevel: 'warn', schema: { body: removedTargetSchema } },
    async (req) => { await e.removeTarget(req.body); return {} })
  app.post<{ Body: InventoryComposition }>(EXPORTER_ROUTES.applyInventory, { logLevel: 'warn', schema: { body: composition } },
    async (req) => e.applyInventory(req.body))
  app.post<{ Body: InventoryComposition }>(EXPORTER_ROUTES.finalizeInventory, { logLevel: 'warn', schema: { body: composition } },
    async (req) => e.finalizeInventory(req.body))
  app.post<{ Body: ResolvedSink }>(EXPORTER_ROUTES.checkSink, { logLevel: 'warn', schema: { body: resolvedSinkSchema() } },
    async (req) => e.checkSink(req.body))
  app.get('/healthz', QUIET_ROUTE, async () => ({ status: 'ok' }))
  // A standby is alive and takes reports, but it is not the exporter that writes.
  app.get('/readyz', QUIET_ROUTE, async (_request, reply) => {
    const ok = deps.ready?.() ?? true
    return reply.code(ok ? 200 : 503).send({ status: ok ? 'ready' : 'standby' })
  })
  app.get('/metrics', QUIET_ROUTE, async (_request, reply) => reply.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics()))
  return app
}
