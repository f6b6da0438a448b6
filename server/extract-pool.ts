import { availableParallelism } from 'node:os'
import { Worker } from 'node:worker_threads'
import type { KubeObject, KollectTargetSpec } from '../api/types.js'
import type { ExpressionLimits } from '../hooks/limits.js'
import type { TargetSyncResult } from '../hooks/target.js'
import type { PluralResolver } from './discovery.js'
import type { FromWorker, ToWorker } from './extract-worker.js'

export interface PoolOptions {
  size?: number
  /** Wall-clock budget of one sync in a worker, from the moment a worker takes it. */
  timeoutMs: number
  /** Heap limit of a worker; a sync that needs more ends that worker, not the process. */
  memoryMb: number
  limits: ExpressionLimits
  resolvePlural: PluralResolver
}

export type PoolOutcome =
  | { kind: 'done'; result: TargetSyncResult }
  | { kind: 'bad'; code: 'KOLLECT_ERR_HOOK_BAD_JSON' | 'KOLLECT_ERR_HOOK_BAD_REQUEST' | 'KOLLECT_ERR_HOOK_TOO_DEEP'; message: string }
  | { kind: 'aborted'; reason: 'EvaluationTimeout' | 'ResourceLimit'; message: string; parent: KubeObject | null }

interface Job {
  id: number
  body: Buffer | null
  resolve(outcome: PoolOutcome): void
  parent: KubeObject | null
  timer?: NodeJS.Timeout
}

interface Slot {
  worker: Worker
  job: Job | null
}

const WORKER_URL = new URL('./extract-worker.js', import.meta.url)

/** Bytes that own their whole ArrayBuffer, so it can be transferred (small Buffers share a pool). */
function ownBytes(buf: Buffer): Uint8Array {
  if (buf.byteOffset === 0 && buf.byteLength === buf.buffer.byteLength) return new Uint8Array(buf.buffer, 0, buf.byteLength)
  return new Uint8Array(buf)
}

/** A fixed set of extraction workers with a deadline per job; a stalled or exhausted worker is replaced. */
export class ExtractPool {
  private readonly slots: Slot[] = []
  private readonly queue: Job[] = []
  private nextId = 1
  private closed = false

  constructor(private readonly options: PoolOptions) {
    const size = options.size ?? Math.max(1, availableParallelism())
    for (let i = 0; i < size; i++) this.slots.push(this.spawn())
  }

  /** The body is handed over to the worker (its memory is transferred, not copied). */
  run(body: Buffer): Promise<PoolOutcome> {
    return new Promise((resolve) => {
      this.queue.push({ id: this.nextId++, body, resolve, parent: null })
      this.pump()
    })
  }

  async close(): Promise<void> {
    this.closed = true
    await Promise.all(this.slots.map((s) => s.worker.terminate()))
  }

  private spawn(): Slot {
    const worker = new Worker(WORKER_URL, { resourceLimits: { maxOldGenerationSizeMb: this.options.memoryMb } })
    const slot: Slot = { worker, job: null }
    worker.on('message', (msg: FromWorker) => void this.onMessage(slot, msg))
    // A result that cannot be deserialised here (nesting deeper than structured clone allows)
    // would otherwise be dropped silently and the job would wait out its deadline.
    worker.on('messageerror', () => this.fail(slot, 'ResourceLimit', 'the extraction result could not be transferred (nested too deeply)'))
    // An out-of-memory worker emits 'error' and then exits; either way its job ends here.
    worker.on('error', (err) => this.fail(slot, 'ResourceLimit', `extraction stopped: ${err.message}`))
    worker.on('exit', () => this.fail(slot, 'ResourceLimit', 'extraction worker exited'))
    worker.unref()
    return slot
  }

  private pump(): void {
    for (const slot of this.slots) {
      if (slot.job || this.queue.length === 0) continue
      const job = this.queue.shift() as Job
      slot.job = job
      job.timer = setTimeout(() => {
        this.fail(slot, 'EvaluationTimeout', `extraction did not finish within ${this.options.timeoutMs} ms; simplify the profile or split the target`)
      }, this.options.timeoutMs)
      const body = ownBytes(job.body as Buffer)
      job.body = null
      slot.worker.postMessage({ type: 'job', id: job.id, body, limits: this.options.limits } satisfies ToWorker, [body.buffer as ArrayBuffer])
    }
  }

  private async onMessage(slot: Slot, msg: FromWorker): Promise<void> {
    const job = slot.job
    if (!job || job.id !== msg.id) return
    if (msg.type === 'parsed') {
      job.parent = msg.parent as KubeObject
      const spec = (msg.parent.spec ?? {}) as Partial<KollectTargetSpec>
      const plural = await this.options.resolvePlural(spec.resource)
      if (slot.job === job) slot.worker.postMessage({ type: 'plural', id: job.id, plural } satisfies ToWorker)
      return
    }
    this.finish(slot, msg.type === 'done' ? { kind: 'done', result: JSON.parse(msg.result) as TargetSyncResult } : { kind: 'bad', code: msg.code, message: msg.message })
  }

  private finish(slot: Slot, outcome: PoolOutcome): void {
    const job = slot.job
    if (!job) return
    clearTimeout(job.timer)
    slot.job = null
    job.resolve(outcome)
    this.pump()
  }

  /** End the slot's job and replace its worker: a stalled worker cannot be interrupted any other way. */
  private fail(slot: Slot, reason: 'EvaluationTimeout' | 'ResourceLimit', message: string): void {
    const index = this.slots.indexOf(slot)
    if (index < 0) return
    const job = slot.job
    slot.job = null
    slot.worker.removeAllListeners()
    slot.worker.on('error', () => undefined)
    void slot.worker.terminate()
    if (this.closed) return
    this.slots[index] = this.spawn()
    if (job) {
      clearTimeout(job.timer)
      job.resolve({ kind: 'aborted', reason, message, parent: job.parent })
    }
    this.pump()
  }
}
