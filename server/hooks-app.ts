import { randomUUID } from 'node:crypto'
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import { refKey } from '../api/canonical.js'
import type { ExporterClient, InventoryComposition, KollectSinkSpec, KollectTargetSpec } from '../api/types.js'
import { composeInventory, customizeInventory, finalizeInventoryResponse, syncInventoryResponse } from '../hooks/inventory.js'
import { syncProfile } from '../hooks/profile-sync.js'
import { parentRef, parentSpec, syncRequest, type CustomizeRequest } from '../hooks/request.js'
import { customizeSink, mayCheck, reviewSink, sinkSyncResponse } from '../hooks/sink-sync.js'
import { abortedTargetSync, customizeTarget, finalizeTarget, refusedTargetSync, staleItemsTargetSync, staleTargetSync } from '../hooks/target.js'
import { authorized } from './auth.js'
import type { Config } from './config.js'
import type { PluralResolver } from './discovery.js'
import { KollectError, errorBody } from './errors.js'
import type { Logger } from './logger.js'
import type { Metrics } from './metrics.js'
import { ExtractPool, MIN_BUDGET_SHARE } from './extract-pool.js'
import { HTTP_TIMEOUTS } from './http-timeouts.js'
import { jsonBodyParser } from './json-depth.js'
import { jsonErrorSummary } from './json-errors.js'
import { sniffNamespace } from './namespace-sniff.js'
import { customizeSchema, syncSchema } from './request-schemas.js'
import { checkEndpoint } from './ssrf.js'

export interface HooksDeps {
  config: Config
  logger: Logger
  metrics: Metrics
  exporter: ExporterClient
  resolvePlural: PluralResolver
  /** Extra readiness check (exporter reachable, leadership); healthz never calls it. */
  ready?: () => Promise<boolean>
  /** More exposition text for /metrics: the exporter sidecar's, which listens on loopback only. */
  moreMetrics?: () => Promise<string>
}

type Handler = (body: unknown, request: FastifyRequest, reply: FastifyReply) => Promise<unknown>

export async function buildHooksApp(deps: HooksDeps): Promise<FastifyInstance> {
  const { config, logger, metrics, exporter } = deps
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: 1024 * 1024,
    genReqId: (req) => (typeof req.headers['x-request-id'] === 'string' && req.headers['x-request-id'].length <= 128 ? req.headers['x-request-id'] : randomUUID()),
    ...HTTP_TIMEOUTS,
    // Plain ajv for the envelope: no coercion, so a wrong type is a 400, not silently fixed.
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } },
  })

  // Metacontroller sends application/json; curl -d sends form encoding. Every content type is
  // parsed as JSON, with bounded nesting and the secure parser that refuses __proto__ and constructor keys.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'buffer' }, jsonBodyParser(config.limits.maxJsonDepth))

  let inflight = 0
  let inflightBytes = 0
  // Attached to each hook route (not matched on the raw URL, which the router decodes first):
  // the bearer check, then the in-flight bounds. A body without Content-Length (chunked) counts
  // as the largest body allowed.
  const guard = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (!authorized(request.headers.authorization, config.hookAuth)) throw new KollectError('KOLLECT_ERR_HOOK_UNAUTHORIZED')
    const declared = request.headers['content-length']
    const bytes = declared === undefined ? config.hookBodyLimit : Number(declared) || 0
    if (inflight >= config.maxInflightRequests || (inflight > 0 && inflightBytes + bytes > config.maxInflightBytes)) {
      metrics.hookShed.inc({ reason: inflight >= config.maxInflightRequests ? 'requests' : 'bytes' })
      reply.header('Retry-After', '1')
      throw new KollectError('KOLLECT_ERR_HOOK_OVERLOADED', '1')
    }
    inflight++
    inflightBytes += bytes
    let released = false
    reply.raw.once('close', () => {
      if (released) return
      released = true
      inflight--
      inflightBytes -= bytes
    })
  }

  app.setNotFoundHandler((request, reply) => {
    const err = new KollectError('KOLLECT_ERR_HOOK_NOT_FOUND', `${request.method} ${request.url.split('?')[0]}`)
    void reply.code(err.statusCode).send(errorBody(err))
  })

  app.setErrorHandler((error: Error & { code?: string; statusCode?: number; validation?: unknown }, request, reply) => {
    const err = toKollectError(error, config.hookBodyLimit)
    if (err.statusCode >= 500) request.log.error({ err: error }, 'hook failed')
    else request.log.info({ code: err.code, message: err.message }, 'hook request refused')
    void reply.code(err.statusCode).send(errorBody(err))
  })

  const pool = new ExtractPool({
    size: config.extractWorkers || undefined,
    reserve: config.extractReserve,
    timeoutMs: config.syncTimeoutMs,
    memoryMb: config.workerMemoryMb,
    limits: config.limits,
    resolvePlural: deps.resolvePlural,
    log: (message, fields) => logger.warn(fields, message),
  })
  app.addHook('onClose', async () => pool.close())
  // Children take a moment to load; syncs that arrived before would spend their budget waiting.
  if (!(await pool.ready(30_000))) logger.error('extraction processes did not start within 30 s; target syncs wait for them')

  const route = (kind: string, hook: string, schema: object | null, handler: Handler, on: FastifyInstance = app) => {
    on.post(`/hooks/${kind}/${hook}`, { bodyLimit: config.hookBodyLimit, onRequest: guard, ...(schema ? { schema: { body: schema } } : {}) }, async (request: FastifyRequest, reply: FastifyReply) => {
      const end = metrics.hookDuration.startTimer({ kind, hook })
      try {
        const result = await handler(request.body, request, reply)
        end({ code: '200' })
        return reply.code(200).send(result)
      } catch (err) {
        end({ code: String(toKollectError(err as Error, config.hookBodyLimit).statusCode) })
        throw err
      }
    })
  }

  route('targets', 'customize', customizeSchema, async (body) => {
    const req = body as CustomizeRequest
    return customizeTarget(req, { plural: await deps.resolvePlural(parentSpec<KollectTargetSpec>(req.parent).resource), limits: config.limits })
  })
  // Target syncs carry the big bodies and the user expressions: the body is parsed, checked and
  // extracted in a child process with a deadline from the sync's arrival, so this route sees the
  // raw bytes only (and sniffs the namespace that queues them).
  const nextSequence = reportSequence()
  const arrivals = new WeakMap<FastifyRequest, number>()
  await app.register(async (raw) => {
    raw.removeAllContentTypeParsers()
    raw.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, bytes, done) => done(null, bytes))
    // Stamped on arrival, before the body is read: a sync that arrives later carries newer state
    // (Metacontroller never runs two syncs of one parent at once), however long each one parses.
    raw.addHook('onRequest', async (request) => { arrivals.set(request, nextSequence()) })
    route('targets', 'sync', null, async (body, request, reply) => {
      const bytes = Buffer.isBuffer(body) ? body : Buffer.alloc(0)
      const outcome = await pool.run(bytes, { arrival: performance.now() - reply.elapsedTime, namespace: sniffNamespace(bytes) })
      if (outcome.kind === 'bad') throw new KollectError(outcome.code, outcome.message)
      if (outcome.kind === 'queued') {
        metrics.hookShed.inc({ reason: 'queue' })
        const retryAfter = String(Math.max(1, Math.ceil((config.syncTimeoutMs * MIN_BUDGET_SHARE) / 1000)))
        reply.header('Retry-After', retryAfter)
        throw new KollectError('KOLLECT_ERR_HOOK_QUEUE_TIMEOUT', String(Math.round(outcome.waitedMs)), retryAfter)
      }
      if (outcome.kind === 'aborted') {
        metrics.hookShed.inc({ reason: outcome.reason })
        if (!outcome.parent) throw new KollectError('KOLLECT_ERR_HOOK_TIMEOUT')
        return abortedTargetSync(outcome.parent, outcome.reason, outcome.message)
      }
      const { report, stopped } = outcome.result
      let { response } = outcome.result
      if (stopped) metrics.hookShed.inc({ reason: stopped })
      if (report) {
        const sequence = arrivals.get(request) ?? nextSequence()
        const result = await callExporter(() => exporter.reportTarget({ ...report, sequence }))
        const target = refKey(report.target)
        metrics.itemsExtracted.inc({ target }, report.items.length)
        if (!result.accepted && result.reason === 'Stale') {
          metrics.staleReports.inc({ target, dropped: 'report' })
          request.log.info({ target, generation: report.generation, sequence, heldGeneration: result.heldGeneration }, 'target report dropped as stale')
          response = staleTargetSync(response, result)
        } else if (!result.accepted) response = refusedTargetSync(response, result.message)
        else if (result.staleItems) {
          metrics.staleReports.inc({ target, dropped: 'items' }, result.staleItems)
          response = staleItemsTargetSync(response, result.staleItems)
        }
      }
      const failed = (response.status['failedCount'] as number | undefined) ?? 0
      if (failed > 0) metrics.extractionErrors.inc({ target: refKey(report?.target ?? { namespace: '', name: '' }) }, failed)
      return response
    }, raw)
  })
  route('targets', 'finalize', syncSchema, async (body) => {
    const req = syncRequest(body)
    const uid = req.parent.metadata?.uid
    await callExporter(() => exporter.removeTarget(typeof uid === 'string' && uid !== '' ? { ...parentRef(req.parent), uid } : parentRef(req.parent)))
    return finalizeTarget(req)
  })
  route('inventories', 'customize', customizeSchema, async (body) => customizeInventory(body as CustomizeRequest))
  route('inventories', 'sync', syncSchema, async (body) => {
    const req = syncRequest(body)
    const composed = composeInventory(req)
    const state = composed.ok ? await callExporter(() => exporter.applyInventory(composed.composition)) : null
    return syncInventoryResponse(req, composed, state)
  })
  route('inventories', 'finalize', syncSchema, async (body) => {
    const req = syncRequest(body)
    const composed = composeInventory(req)
    // An invalid spec still gets finalized: the exporter falls back to what it last applied.
    const composition: InventoryComposition = composed.ok
      ? composed.composition
      : { inventory: parentRef(req.parent), generation: 0, targets: [], sinks: [], debounceMs: 0, maxWaitMs: 0, suspend: true }
    const result = await callExporter(() => exporter.finalizeInventory(composition))
    return finalizeInventoryResponse(req, composed, result)
  })
  route('profiles', 'sync', syncSchema, async (body) => syncProfile(syncRequest(body), config.limits))
  route('sinks', 'customize', customizeSchema, async (body) => customizeSink(body as CustomizeRequest))
  route('sinks', 'sync', syncSchema, async (body) => {
    const req = syncRequest(body)
    const policy = { checkEndpoint: (url: string) => checkEndpoint(url, config.allowPrivateSinks) }
    // Reachability only for a valid configuration whose Secret the scope allows: a refused
    // endpoint is never contacted, and a refused Secret never read.
    const review = reviewSink(req, policy)
    const check = mayCheck(review) ? await callExporter(() => exporter.checkSink({ ...parentRef(req.parent), spec: parentSpec<KollectSinkSpec>(req.parent) })) : undefined
    return sinkSyncResponse(req, review, check)
  })

  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_request, reply) => {
    const ok = deps.ready ? await deps.ready().catch(() => false) : true
    return reply.code(ok ? 200 : 503).send({ status: ok ? 'ready' : 'not ready' })
  })
  app.get('/metrics', async (_request, reply) => {
    const own = await metrics.registry.metrics()
    const more = deps.moreMetrics ? await deps.moreMetrics().catch(() => '') : ''
    return reply.type(metrics.registry.contentType).send(more ? `${own}\n${more}` : own)
  })
  return app
}

/**
 * A hybrid clock in microseconds: wall time, but strictly increasing in one process. Replicas'
 * stamps compare as far as their clocks agree (see docs/design.md, Stale reports).
 */
export function reportSequence(now: () => number = Date.now): () => number {
  let last = 0
  return () => (last = Math.max(now() * 1000, last + 1))
}

async function callExporter<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn()
  } catch (err) {
    throw new KollectError('KOLLECT_ERR_EXPORTER_UNAVAILABLE', (err as Error).message)
  }
}

function toKollectError(error: Error & { code?: string; statusCode?: number; validation?: unknown; validationContext?: string }, bodyLimit: number): KollectError {
  if (error instanceof KollectError) return error
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new KollectError('KOLLECT_ERR_HOOK_BODY_TOO_LARGE', String(bodyLimit))
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new KollectError('KOLLECT_ERR_HOOK_BAD_JSON', jsonErrorSummary(error.message))
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new KollectError('KOLLECT_ERR_HOOK_BAD_CONTENT_TYPE')
  }
  if (error.validation) return new KollectError('KOLLECT_ERR_HOOK_BAD_REQUEST', error.message)
  if (error instanceof SyntaxError || error.statusCode === 400) return new KollectError('KOLLECT_ERR_HOOK_BAD_JSON', jsonErrorSummary(error.message))
  if (error.statusCode === 413) return new KollectError('KOLLECT_ERR_HOOK_BODY_TOO_LARGE', String(bodyLimit))
  return new KollectError('KOLLECT_ERR_INTERNAL')
}

