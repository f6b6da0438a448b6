// An extraction child process: parses a target sync's body, validates it, asks the server for
// the plural, and runs syncTarget. It is a process of its own, not a worker thread, because a
// V8 fatal error (an "invalid size" abort, a heap limit) ends the whole process it happens in:
// here that is this child, which the pool replaces, and never the server.
// Frames come and go on fd 3 (server/extraction/frames.ts); the IPC channel fork() opens only tells this
// child that the server is gone.
import net from 'node:net'
import type { HeldReport, Item } from '../../api/types.js'
import type { ExpressionLimits } from '../../hooks/limits.js'
import type { PluralResolution } from '../../hooks/plural.js'
import { heldReport } from '../../api/report.js'
import { syncRequest, type SyncRequest } from '../../hooks/request.js'
import { syncTarget, type RecordSink, type SyncPhases } from '../../hooks/target.js'
import type { ObjectRecord, Tallied } from '../../hooks/target-tally.js'
import { enableLinearRegExps } from '../process/regexp-engine.js'
import { readJson, type Scan } from '../protocol/json-depth.js'
import { syncValidator } from '../protocol/request-schemas.js'
import { encodeFrame, FrameDecoder } from './frames.js'
import { encodeRecords } from './records-wire.js'

/** The body (job) or nothing (plural) follows as the frame's payload. */
export type ToChild =
  /** namespace: the one the sync queued under (null: the server could not tell). */
  /** records: answer with each object's record (records-wire.ts) along with the report. */
  /** scanned: what scanJson() gave for the body as the server received it (the child then does not scan it). */
  | { type: 'job'; id: number; limits: ExpressionLimits; namespace: string | null; records?: boolean; scanned?: Scan.Plain | Scan.Suspect }
  | { type: 'plural'; id: number; plural: PluralResolution }

/** The result as JSON text (done) follows as the payload; the others carry none. */
export type FromChild =
  | { type: 'ready' }
  | { type: 'parsed'; id: number; parent: { metadata?: unknown; spec?: unknown } }
  /** claimed: set when the parsed namespace is not the one the sync queued under (null: none parsed). */
  | {
    type: 'bad'; id: number
    code: 'KOLLECT_ERR_HOOK_BAD_JSON' | 'KOLLECT_ERR_HOOK_BAD_REQUEST' | 'KOLLECT_ERR_HOOK_TOO_DEEP'
    message: string; claimed?: string | null
  }
  /**
   * The payload is the result without its report as JSON (headBytes long), then the report's
   * JSON: the server parses the small first part and sends the report on as it is. With
   * records, the records' JSON (metaBytes long, records-wire.ts) comes between the two.
   */
  | { type: 'done'; id: number; phases: ChildPhases; headBytes: number; report: ReportSummary | null; records?: { metaBytes: number; objects: number } }
  | { type: 'failed'; id: number; message: string }

/** What the server reads of a report without parsing it: which report it is, and the count it logs. */
export interface ReportSummary extends HeldReport {
  itemCount: number
}

/** Milliseconds of the child's own work per phase, for the benchmark's figures (two clock reads each). */
export interface ChildPhases extends SyncPhases {
  parse: number
  validate: number
  serialise: number
}

/** Only what the server needs (plural lookup, a status when the job is stopped): small and flat. */
function parentSummary(parent: SyncRequest['parent']): { metadata: Record<string, unknown>; spec: Record<string, unknown> } {
  const m = parent.metadata ?? {}
  const r = (parent['spec'] as { resource?: Record<string, unknown> } | undefined)?.resource
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined)
  return {
    metadata: { name: str(m.name), namespace: str(m.namespace), uid: str(m.uid), generation: typeof m.generation === 'number' ? m.generation : undefined },
    spec: r && typeof r === 'object'
      ? { resource: { group: str(r['group']), version: str(r['version']), kind: str(r['kind']), plural: str(r['plural']) } }
      : {},
  }
}

/**
 * A tiny sync run once before the child says it is ready: the first sync in a fresh process
 * compiles the CRD schemas and warms the CEL and JSONPath engines (~0.6 s of CPU), which would
 * otherwise land on the first real sync and its deadline.
 */
function warmUp(): void {
  const meta = (kind: string, name: string) => ({
    apiVersion: 'kollect.dev/v1alpha1', kind, metadata: { name, namespace: 'warm-up', uid: name, generation: 1 },
  })
  const profile = {
    ...meta('KollectProfile', 'p'),
    spec: { attributes: [{ name: 'a', cel: "object.metadata.name + ''", type: 'string' }, { name: 'b', jsonPath: '$.metadata.name' }] },
  }
  const parent = {
    ...meta('KollectTarget', 't'),
    spec: {
      resource: { group: '', version: 'v1', kind: 'ConfigMap', plural: 'configmaps' }, profileRef: { name: 'p' }, matchPolicy: "object.metadata.name != ''",
    },
  }
  const object = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'warm-up', uid: 'c' } }
  syncTarget(
    {
      controller: {}, parent, children: {},
      related: { 'KollectProfile.kollect.dev/v1alpha1': { 'warm-up/p': profile }, 'ConfigMap.v1': { 'warm-up/c': object } },
      finalizing: false,
    },
    { plural: { plural: 'configmaps', source: 'spec' } },
  )
}

class RecordCollector implements RecordSink {
  readonly records: [string, ObjectRecord<Item>][] = []
  tallied: Tallied<Item> | null = null
  add(key: string, record: ObjectRecord<Item>): void {
    this.records.push([key, record])
  }

  complete(tallied: Tallied<Item>): void {
    this.tallied = tallied
  }
}

function main(): void {
  enableLinearRegExps()
  const validate = syncValidator()
  const waiting = new Map<number, { request: SyncRequest; limits: ExpressionLimits; phases: ChildPhases; records: boolean }>()
  const decoder = new FrameDecoder<ToChild>()
  const scratch = Buffer.allocUnsafe(64 * 1024)
  // Reads go straight into the body's buffer: no copy, and as many bytes a read as the pipe holds
  // rather than 64 KiB (a third of the wake-ups of both processes for a 25 MiB body).
  const socket = new net.Socket({
    fd: 3,
    readable: true,
    writable: true,
    onread: {
      buffer: () => decoder.readTarget(scratch),
      callback: (n: number) => {
        for (const { header, payload } of decoder.pushRead(n)) {
          if (header.type === 'job') onJob(header, payload)
          else onPlural(header.id, header.plural)
        }
        return true
      },
    },
  })
  const send = (header: FromChild, payload?: Uint8Array) => {
    for (const part of encodeFrame(header, payload)) socket.write(part)
  }

  const onJob = (job: Extract<ToChild, { type: 'job' }>, body: Buffer) => {
    const { id, limits, namespace: queuedAs } = job
    const records = job.records === true
    const start = performance.now()
    const read = readJson(body, limits.maxJsonDepth, job.scanned)
    if (!read.ok) return void send({ type: 'bad', id, code: read.code, message: read.detail })
    const parsed = read.value
    const parsedAt = performance.now()
    const problem = parsed === null || typeof parsed !== 'object' || Array.isArray(parsed) ? 'body must be object' : validate(parsed)
    if (problem) {
      send({ type: 'bad', id, code: 'KOLLECT_ERR_HOOK_BAD_REQUEST', message: problem })
      return
    }
    const request = syncRequest(parsed)
    // The server queued the sync by the first parent.metadata.namespace in the raw bytes; the
    // sync is processed as the parsed one (the last of duplicate keys, escapes decoded). Only a
    // hand-made body can tell them apart, and it would jump the fair queue in another's name.
    const namespace = request.parent.metadata?.namespace
    if (queuedAs !== null && namespace !== queuedAs) {
      const message = `parent.metadata.namespace must appear once: the body names ${JSON.stringify(queuedAs)} first but parses as another namespace`
      send({ type: 'bad', id, code: 'KOLLECT_ERR_HOOK_BAD_REQUEST', message, claimed: typeof namespace === 'string' ? namespace.slice(0, 253) : null })
      return
    }
    const phases: ChildPhases = { parse: parsedAt - start, validate: performance.now() - parsedAt, select: 0, extract: 0, hash: 0, serialise: 0 }
    waiting.set(id, { request, limits, phases, records })
    send({ type: 'parsed', id, parent: parentSummary(request.parent) })
  }

  const onPlural = (id: number, plural: PluralResolution) => {
    const job = waiting.get(id)
    if (!job) return
    waiting.delete(id)
    let head: string
    let report: string
    let summary: ReportSummary | null
    let records: { metaBytes: number; objects: number } | undefined
    const { phases } = job
    try {
      const collected = job.records ? new RecordCollector() : undefined
      const { report: synced, ...rest } = syncTarget(job.request, { plural, limits: job.limits, phases, ...(collected ? { records: collected } : {}) })
      const serialising = performance.now()
      head = JSON.stringify(rest)
      summary = synced && { ...heldReport(synced), itemCount: synced.items.length }
      report = ''
      if (collected?.tallied && synced) {
        // Written from its items' texts, with their places in it: the server reads the records without parsing the report.
        const wire = encodeRecords(heldReport(synced), collected.records, collected.tallied)
        records = { metaBytes: Buffer.byteLength(wire.meta), objects: collected.records.length }
        report = wire.meta + wire.report
      } else if (synced) report = JSON.stringify(synced)
      phases.serialise = performance.now() - serialising
    } catch (err) {
      // A bug, not the profile's doing: the server logs it; the message stays out of status.
      send({ type: 'failed', id, message: (err as Error).message })
      return
    }
    const done: FromChild = { type: 'done', id, phases, headBytes: Buffer.byteLength(head), report: summary, ...(records ? { records } : {}) }
    send(done, Buffer.from(head + report))
  }

  // The server is gone (or closed the pipe): nothing more will come.
  socket.on('close', () => process.exit(0))
  socket.on('error', () => process.exit(0))
  process.on('disconnect', () => process.exit(0))
  // The server stops its children itself. A signal to the whole process group (Ctrl-C on
  // npm start) must not look like a crash that the pool answers with replacements.
  process.on('SIGINT', () => undefined)
  process.on('SIGTERM', () => undefined)
  warmUp()
  validate({ parent: { metadata: { name: 'warm-up' } } })
  send({ type: 'ready' })
}

main()
