import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import { refKey } from '../../../api/canonical.js'
import { heldReport, withSequence } from '../../../api/report.js'
import type { KollectTargetSpec } from '../../../api/types.js'
import { parentRef, parentSpec, syncRequest, type CustomizeRequest } from '../../../hooks/request.js'
import { abortedTargetSync, customizeTarget, finalizeTarget, refusedTargetSync, staleItemsTargetSync, staleTargetSync } from '../../../hooks/target.js'
import { sniffNamespace } from '../../extraction/namespace-sniff.js'
import { MIN_BUDGET_SHARE } from '../../extraction/pool.js'
import { IncrementalSyncs, type SyncPlan } from '../../extraction/incremental.js'
import { ObjectCache } from '../../extraction/object-cache.js'
import type { JobInfo } from '../../extraction/outcome.js'
import type { Gmac } from '../../extraction/body-scan.js'
import { UnchangedSyncs } from '../../extraction/unchanged.js'
import { BoundsScanner } from '../../extraction/bounds-scanner.js'
import { KollectError } from '../../protocol/errors.js'
import { customizeSchema, syncSchema } from '../../protocol/request-schemas.js'
import { arrivingBody } from './arriving-body.js'
import { callExporter, hookRoute, type HookRouteDeps } from './hook-route.js'

/** /hooks/targets/{customize,sync,finalize}. */
export const targetRoutes: FastifyPluginAsync<HookRouteDeps> = async (app, deps) => {
  const { config, metrics, exporter } = deps
  hookRoute(app, deps, 'targets', 'customize', customizeSchema, async (body) => {
    const req = body as CustomizeRequest
    return customizeTarget(req, { plural: await deps.resolvePlural(parentSpec<KollectTargetSpec>(req.parent).resource), limits: config.limits })
  })
  // Target syncs carry the big bodies and the user expressions: the body is parsed, checked and
  // extracted in a child process with a deadline from the sync's arrival, so this route sees the
  // raw bytes only (and sniffs the namespace that queues them).
  const nextSequence = reportSequence()
  const unchanged = new UnchangedSyncs(config.unchangedSyncs)
  const scanner = new BoundsScanner()
  app.addHook('onClose', async () => scanner.close())
  const incremental = new IncrementalSyncs(
    new ObjectCache(config.objectCacheBytes, config.objectCacheNamespaceShare), deps.resolvePlural, config.limits, {
      counted(reused, extracted) {
        metrics.syncObjects.inc({ result: 'reused' }, reused)
        metrics.syncObjects.inc({ result: 'extracted' }, extracted)
      },
      halved: (result) => metrics.halvedSyncs.inc({ result }),
      halveBytes: config.halveSyncBytes,
      skipped: (bytes) => metrics.skippedBytes.inc(bytes),
      failed: (message) => app.log.error({ error: message }, 'keeping a target sync\'s object records failed'),
      scanner,
    },
  )
  metrics.setObjectCacheBytes(() => incremental.cache.bytes)
  const arrivals = new WeakMap<FastifyRequest, number>()
  /** The body's key for UnchangedSyncs, hashed as it arrives until the sync's plan takes it over. */
  const keys = new WeakMap<FastifyRequest, { hasher: Gmac; taken: boolean }>()
  const plans = new WeakMap<FastifyRequest, Promise<SyncPlan | null>>()
  await app.register(async (raw) => {
    raw.removeAllContentTypeParsers()
    // The body is read as it arrives, in the time the route would wait for it anyway: its key is
    // hashed chunk by chunk, and its structure read against the target's kept records.
    raw.addContentTypeParser('*', arrivingBody(
      (request, arrival) => {
        const key = unchanged.enabled ? { hasher: unchanged.hasher(), taken: false } : undefined
        if (key) keys.set(request, key)
        plans.set(request, incremental.planning(arrival, () => { if (key) key.taken = true }))
      },
      unchanged.enabled ? (request, chunk) => {
        const key = keys.get(request)
        if (key && !key.taken) key.hasher.update(chunk)
      } : undefined,
    ))
    // Stamped on arrival, before the body is read: a sync that arrives later carries newer state
    // (Metacontroller never runs two syncs of one parent at once), however long each one parses.
    raw.addHook('onRequest', async (request) => { arrivals.set(request, nextSequence()) })
    hookRoute(raw, deps, 'targets', 'sync', null, async (body, request, reply) => {
      const bytes = Buffer.isBuffer(body) ? body : Buffer.alloc(0)
      const received = reply.elapsedTime
      const digesting = performance.now()
      const key = keys.get(request)
      const planned = plans.get(request)
      // A plan that took the key over gives it; one that then found the body not plain leaves the whole body to hash.
      const digest = !key ? null : key.taken ? ((await planned)?.digest ?? unchanged.hasher().update(bytes).digest()) : key.hasher.digest()
      const digested = performance.now() - digesting
      const kept = digest === null ? undefined : unchanged.get(digest)
      if (digest !== null && kept) {
        // A failed check is a miss: the sync then runs, and reports, as any other.
        if (await exporter.holdsReport(kept.report).catch(() => false)) {
          metrics.unchangedSyncs.inc({ result: 'reused' })
          app.extractPool.lastPhases = { receive: received, digest: digested, report: reply.elapsedTime - received - digested }
          return kept.response
        }
        unchanged.forget(digest)
        metrics.unchangedSyncs.inc({ result: 'exporter-lacks' })
      }
      const job: JobInfo = { arrival: performance.now() - reply.elapsedTime, namespace: sniffNamespace(bytes) }
      // A large body whose objects all go to extraction is halved between two children when two are free.
      const pair = () => app.extractPool.idleShared() >= 2
      const { outcome, scanMs, mergeMs, settle } = await incremental.extract(bytes, job, (body, info) => app.extractPool.run(body, info), planned, pair)
      if (outcome.kind === 'bad') throw new KollectError(outcome.code, outcome.message)
      // Overload answers 429 with Retry-After (a quarter of the budget), never a late 5xx.
      if (outcome.kind === 'queued' || outcome.kind === 'busy') {
        metrics.hookShed.inc({ reason: outcome.kind === 'queued' ? 'queue' : 'busy' })
        const retryAfter = String(Math.max(1, Math.ceil((config.syncTimeoutMs * MIN_BUDGET_SHARE) / 1000)))
        reply.header('Retry-After', retryAfter)
        if (outcome.kind === 'busy') throw new KollectError('KOLLECT_ERR_HOOK_BUSY', outcome.message, retryAfter)
        throw new KollectError('KOLLECT_ERR_HOOK_QUEUE_TIMEOUT', String(Math.round(outcome.waitedMs)), retryAfter)
      }
      if (outcome.kind === 'aborted') {
        metrics.hookShed.inc({ reason: outcome.reason })
        if (!outcome.parent) throw new KollectError('KOLLECT_ERR_HOOK_TIMEOUT')
        return abortedTargetSync(outcome.parent, outcome.reason, outcome.message)
      }
      const { report, stopped } = outcome.result
      let { response } = outcome.result
      let whole = report !== null && !stopped
      if (stopped) metrics.hookShed.inc({ reason: stopped })
      const reporting = performance.now()
      if (report) {
        const sequence = arrivals.get(request) ?? nextSequence()
        // The items go on as the child serialised them: parsed and serialised once, not three times.
        const { target: ref, generation, itemCount } = report
        const send = (json: Buffer) => callExporter(() => exporter.reportTarget({ target: ref, generation, itemCount, json: withSequence(json, sequence) }))
        // Only what changed since the report the kept records made, when the exporter holds that one.
        let result = report.changes && exporter.takesChanges ? await send(report.changes) : await send(report.json)
        if (!result.accepted && result.reason === 'BaseMismatch') result = await send(report.json)
        const target = refKey(ref)
        metrics.itemsExtracted.inc({ target }, itemCount)
        if (!result.accepted && result.reason === 'Stale') {
          metrics.staleReports.inc({ target, dropped: 'report' })
          request.log.info({ target, generation: report.generation, sequence, heldGeneration: result.heldGeneration }, 'target report dropped as stale')
          response = staleTargetSync(response, result)
          whole = false
        } else if (!result.accepted) {
          response = refusedTargetSync(response, result.message)
          whole = false
        } else if (result.staleItems) {
          whole = false
          metrics.staleReports.inc({ target, dropped: 'items' }, result.staleItems)
          response = staleItemsTargetSync(response, result.staleItems)
        }
      }
      settle(whole, (other) => { if (digest !== null) unchanged.alias(digest, other) })
      // Kept only when the exporter took the whole report: then a byte-identical resync would get this answer again.
      if (digest !== null && whole && report) {
        unchanged.remember(digest, response, heldReport(report))
      }
      const reportMs = performance.now() - reporting
      app.extractPool.lastPhases = { receive: received, digest: digested, scan: scanMs, ...outcome.phases, merge: mergeMs ?? 0, report: reportMs }
      const failed = response.status.failedCount ?? 0
      if (failed > 0) metrics.extractionErrors.inc({ target: refKey(report?.target ?? { namespace: '', name: '' }) }, failed)
      return response
    })
  })
  hookRoute(app, deps, 'targets', 'finalize', syncSchema, async (body) => {
    const req = syncRequest(body)
    const uid = req.parent.metadata?.uid
    await callExporter(() => exporter.removeTarget(typeof uid === 'string' && uid !== '' ? { ...parentRef(req.parent), uid } : parentRef(req.parent)))
    return finalizeTarget(req)
  })
}

/**
 * A hybrid clock in microseconds: wall time, but strictly increasing in one process. Replicas'
 * stamps compare as far as their clocks agree (see docs/design.md, Stale reports).
 */
export function reportSequence(now: () => number = Date.now): () => number {
  let last = 0
  return () => (last = Math.max(now() * 1000, last + 1))
}
