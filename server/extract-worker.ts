// Runs target syncs off the main thread: parsing, selection and extraction of a large request
// take CPU, and a hostile expression could take a lot of it. Here a stall costs one worker,
// which the pool terminates at its deadline, while the main thread keeps serving.
import { parentPort } from 'node:worker_threads'
import sjson from 'secure-json-parse'
import type { ExpressionLimits } from '../hooks/limits.js'
import type { PluralResolution } from '../hooks/plural.js'
import type { SyncRequest } from '../hooks/request.js'
import { syncTarget } from '../hooks/target.js'
import { nestsDeeperThan } from './json-depth.js'
import { jsonErrorSummary } from './json-errors.js'
import { syncValidator } from './request-schemas.js'

export type ToWorker =
  | { type: 'job'; id: number; body: Uint8Array; limits: ExpressionLimits }
  | { type: 'plural'; id: number; plural: PluralResolution }

export type FromWorker =
  | { type: 'parsed'; id: number; parent: { metadata?: unknown; spec?: unknown } }
  | { type: 'bad'; id: number; code: 'KOLLECT_ERR_HOOK_BAD_JSON' | 'KOLLECT_ERR_HOOK_BAD_REQUEST' | 'KOLLECT_ERR_HOOK_TOO_DEEP'; message: string }
  /** The result as JSON text: cheaper to move between threads than a structured clone of 10k items. */
  | { type: 'done'; id: number; result: string }

const validate = syncValidator()

/** Only what the main thread needs (plural lookup, a status on timeout): small and flat, so it always transfers. */
function parentSummary(parent: SyncRequest['parent']): { metadata: Record<string, unknown>; spec: Record<string, unknown> } {
  const m = parent.metadata ?? {}
  const r = (parent['spec'] as { resource?: Record<string, unknown> } | undefined)?.resource
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined)
  return {
    metadata: { name: str(m.name), namespace: str(m.namespace), uid: str(m.uid), generation: typeof m.generation === 'number' ? m.generation : undefined },
    spec: r && typeof r === 'object' ? { resource: { group: str(r['group']), version: str(r['version']), kind: str(r['kind']), plural: str(r['plural']) } } : {},
  }
}
const waiting = new Map<number, { request: SyncRequest; limits: ExpressionLimits }>()
const port = parentPort
if (!port) throw new Error('extract-worker runs as a worker thread')

port.on('message', (msg: ToWorker) => {
  if (msg.type === 'job') {
    if (nestsDeeperThan(msg.body, msg.limits.maxJsonDepth)) return void port.postMessage({ type: 'bad', id: msg.id, code: 'KOLLECT_ERR_HOOK_TOO_DEEP', message: String(msg.limits.maxJsonDepth) } satisfies FromWorker)
    let body: unknown
    try {
      body = sjson.parse(Buffer.from(msg.body.buffer, msg.body.byteOffset, msg.body.byteLength).toString('utf8'), undefined, { protoAction: 'error', constructorAction: 'error' })
    } catch (err) {
      port.postMessage({ type: 'bad', id: msg.id, code: 'KOLLECT_ERR_HOOK_BAD_JSON', message: jsonErrorSummary((err as Error).message) } satisfies FromWorker)
      return
    }
    const problem = body === null || typeof body !== 'object' || Array.isArray(body) ? 'body must be object' : validate(body)
    if (problem) {
      port.postMessage({ type: 'bad', id: msg.id, code: 'KOLLECT_ERR_HOOK_BAD_REQUEST', message: problem } satisfies FromWorker)
      return
    }
    const b = body as Partial<SyncRequest>
    const request: SyncRequest = { controller: b.controller ?? {}, parent: b.parent as SyncRequest['parent'], children: b.children ?? {}, related: b.related ?? {}, finalizing: b.finalizing === true }
    waiting.set(msg.id, { request, limits: msg.limits })
    port.postMessage({ type: 'parsed', id: msg.id, parent: parentSummary(request.parent) } satisfies FromWorker)
    return
  }
  const job = waiting.get(msg.id)
  if (!job) return
  waiting.delete(msg.id)
  port.postMessage({ type: 'done', id: msg.id, result: JSON.stringify(syncTarget(job.request, { plural: msg.plural, limits: job.limits })) } satisfies FromWorker)
})
