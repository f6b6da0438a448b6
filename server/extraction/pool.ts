import { availableParallelism } from 'node:os'
import type { KubeObject, KollectTargetSpec } from '../../api/types.js'
import type { TargetSyncResult } from '../../hooks/target.js'
import type { FromChild } from './child.js'
import type { ChildResult, JobInfo, PoolOptions, PoolOutcome, StopReason } from './outcome.js'
import type { Scan } from '../protocol/json-depth.js'
import { FairQueue } from './queue.js'
import { assignRole, sendToSlot, spawnSlot, stopSlot, type Slot as ChildSlot } from './slot.js'

export type { JobInfo, PoolOptions, PoolOutcome, StopReason } from './outcome.js'

/** A queued sync is refused once less than this share of its budget is left. */
export const MIN_BUDGET_SHARE = 0.25

const UNKNOWN = ''
const DIED = 'the extraction process ended before it finished (out of memory or a fatal error); split the target or simplify the profile'
const INTERNAL = 'extraction stopped by an internal error'

interface Job {
  id: number
  namespace: string
  arrival: number
  started?: number
  probation?: boolean
  body: Buffer | readonly Buffer[] | null
  records: boolean
  scanned?: Scan.Plain | Scan.Suspect
  parent: KubeObject | null
  resolve(outcome: PoolOutcome): void
  timer?: NodeJS.Timeout
}

type Slot = ChildSlot<Job>

/**
 * Extraction child processes with a supervisor, fed by a fair queue (server/extraction/queue.ts).
 * - A child that dies (fatal error, heap limit, signal) is replaced; its sync ends ResourceLimit.
 * - A sync past arrival + timeoutMs has its child killed and ends EvaluationTimeout.
 * - The reserve children only take a sync from a namespace whose recent syncs were short (under
 *   the share of the budget below). A sync that waited too long to start is refused (429) instead.
 */
export class ExtractPool {
  private readonly slots: Slot[] = []
  private readonly queue: FairQueue<Job>
  /** A sync that ran longer is not short: it keeps its namespace off the reserve, and ends a newcomer's probation. */
  private readonly shortMs: number
  /** A started, idle child that takes a dead or killed child's place at once (starting one takes 0.3–1 s). */
  private standby: Slot | null
  private nextId = 1
  private closed = false
  private readyWaiters: (() => void)[] = []
  /** The last completed sync's phases, with the route's own (receive, report): read by bench/hook-sync. */
  lastPhases: Record<string, number> | null = null

  constructor(private readonly options: PoolOptions) {
    this.shortMs = options.timeoutMs * MIN_BUDGET_SHARE
    this.queue = new FairQueue(this.shortMs)
    const size = options.size || Math.max(2, availableParallelism())
    for (let i = 0; i < size + (options.reserve ?? 1); i++) this.slots.push(assignRole(this.spawn(), i >= size))
    this.standby = this.spawn()
  }

  /** Resolves once every child has started (true), or after timeoutMs (false). */
  async ready(timeoutMs: number): Promise<boolean> {
    const deadline = performance.now() + timeoutMs
    while (!this.slots.every((s) => s.ready) || this.standby?.ready === false) {
      const left = deadline - performance.now()
      if (left <= 0 || this.closed) return false
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.readyWaiters.push(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
    return true
  }

  /** Process ids of the children, for tests and diagnostics. */
  pids(): number[] {
    return [...this.slots, ...(this.standby ? [this.standby] : [])].map((s) => s.child.pid ?? 0)
  }

  /** Shared children that would start a sync at once (none while one waits). */
  idleShared(): number {
    return this.queue.empty ? this.slots.filter((s) => !s.reserve && !s.job && s.ready).length : 0
  }

  /** The body (or its parts, in order) goes to a child as it is; the caller must not reuse it. */
  run(body: Buffer | readonly Buffer[], info: JobInfo): Promise<PoolOutcome> {
    return new Promise((resolve) => {
      const job: Job = {
        id: this.nextId++, namespace: info.namespace ?? UNKNOWN, arrival: info.arrival, body, records: info.records === true, parent: null, resolve,
        ...(info.scanned === undefined ? {} : { scanned: info.scanned }),
      }
      this.queue.push(job)
      const refuseAt = job.arrival + this.options.timeoutMs * (1 - MIN_BUDGET_SHARE)
      job.timer = setTimeout(() => this.refuse(job), Math.max(0, refuseAt - performance.now()))
      this.pump()
    })
  }

  async close(): Promise<void> {
    this.closed = true
    for (const job of this.queue.drain()) this.settle(job, { kind: 'queued', waitedMs: performance.now() - job.arrival })
    for (const slot of this.slots) {
      const job = slot.job
      slot.job = null
      if (job) this.settle(job, { kind: 'aborted', reason: 'ResourceLimit', message: 'the server is shutting down', parent: job.parent })
    }
    await Promise.all([...this.slots, ...(this.standby ? [this.standby] : [])].map((s) => stopSlot(s)))
  }

  private spawn(): Slot {
    return spawnSlot<Job>(this.options.memoryMb, {
      message: (slot, msg, payload) => void this.onMessage(slot, msg, payload),
      exit: (slot, code, signal) => this.onExit(slot, code, signal),
    })
  }

  /** Start queued syncs on free children, round robin over namespaces; shared children first. */
  private pump(): void {
    if (this.closed) return
    for (const reserve of [false, true]) {
      for (const slot of this.slots) {
        if (slot.reserve !== reserve || slot.job || !slot.ready || this.queue.empty) continue
        const job = this.queue.take(reserve)
        if (!job) break
        this.start(slot, job)
      }
    }
    // A newcomer's sync has run longer than short on a reserve child that a namespace with a
    // record of short syncs waits for: take it back (429), so names made up per body cannot keep
    // the reserve from known tenants. A short newcomer sync is left to finish.
    if (this.queue.reserveWanted() && !this.slots.some((s) => s.reserve && !s.job)) {
      const now = performance.now()
      const slot = this.slots.find((s) => s.reserve && s.job?.probation && now - (s.job.started ?? now) >= this.shortMs)
      const index = slot ? this.slots.indexOf(slot) : -1
      if (slot && index >= 0) {
        void stopSlot(slot)
        const message = 'its reserve extraction process was taken back for a namespace with a record of short syncs'
        this.replace(slot, index, { kind: 'busy', message }, 0, false)
      }
    }
  }

  private start(slot: Slot, job: Job): void {
    clearTimeout(job.timer)
    job.started = performance.now()
    slot.job = job
    // The moment its probation may end: pump() then takes the child back if a known namespace waits.
    if (job.probation) setTimeout(() => this.pump(), this.shortMs + 1).unref()
    job.timer = setTimeout(() => {
      this.abort(slot, 'EvaluationTimeout', `extraction did not finish within ${this.options.timeoutMs} ms; simplify the profile or split the target`)
    }, Math.max(0, job.arrival + this.options.timeoutMs - performance.now()))
    const body = job.body as Buffer | readonly Buffer[]
    job.body = null
    // The child refuses a body whose parsed namespace is not the one it queued under.
    const asked = { ...(job.records ? { records: true } : {}), ...(job.scanned === undefined ? {} : { scanned: job.scanned }) }
    sendToSlot(slot, { type: 'job', id: job.id, limits: this.options.limits, namespace: job.namespace || null, ...asked }, body)
  }

  /** A queued sync whose budget is mostly gone: better a 429 now than an answer too late. */
  private refuse(job: Job): void {
    if (!this.queue.remove(job)) return
    job.body = null
    this.settle(job, { kind: 'queued', waitedMs: performance.now() - job.arrival })
  }

  private async onMessage(slot: Slot, msg: FromChild, payload: Buffer): Promise<void> {
    if (msg.type === 'ready') {
      slot.ready = true
      for (const waiter of this.readyWaiters.splice(0)) waiter()
      this.pump()
      return
    }
    const job = slot.job
    if (!job || job.id !== msg.id) return
    switch (msg.type) {
      case 'parsed': {
        job.parent = msg.parent as KubeObject
        const spec = (msg.parent.spec ?? {}) as Partial<KollectTargetSpec>
        const plural = await this.options.resolvePlural(spec.resource)
        if (slot.job === job) sendToSlot(slot, { type: 'plural', id: job.id, plural })
        return
      }
      case 'done': {
        const parsing = performance.now()
        const head = JSON.parse(payload.toString('utf8', 0, msg.headBytes)) as Omit<TargetSyncResult, 'report'>
        const rest = payload.subarray(msg.headBytes)
        const meta = msg.records ? rest.subarray(0, msg.records.metaBytes) : null
        const json = meta ? rest.subarray(meta.length) : rest
        const records = meta && { meta, objects: msg.records?.objects ?? 0 }
        const result: ChildResult = { ...head, report: msg.report ? { ...msg.report, json } : null, ...(records ? { records } : {}) }
        const now = performance.now()
        const c = msg.phases
        // Everything between the job's start here and its result that the child did not account for: frames, pipe, plural lookup.
        const handOff = parsing - (job.started ?? parsing) - (c.parse + c.validate + c.select + c.extract + c.hash + c.serialise)
        return this.finish(slot, { kind: 'done', result, phases: { ...c, handOff, resultParse: now - parsing } })
      }
      case 'bad':
        // A body that queued under one namespace and parses as another: both are charged a
        // whole budget, which keeps them off the reserve children for a while.
        if (msg.claimed !== undefined) {
          this.queue.charge(job.namespace, this.options.timeoutMs)
          if (msg.claimed !== null) this.queue.charge(msg.claimed, this.options.timeoutMs)
        }
        return this.finish(slot, { kind: 'bad', code: msg.code, message: msg.message }, msg.claimed === undefined)
      case 'failed':
        this.options.log?.('extraction failed', { error: msg.message })
        return this.finish(slot, { kind: 'aborted', reason: 'ResourceLimit', message: INTERNAL, parent: job.parent })
    }
  }

  private finish(slot: Slot, outcome: PoolOutcome, record = true): void {
    const job = slot.job
    if (!job) return
    slot.job = null
    this.release(job, record)
    job.resolve(outcome)
    this.pump()
  }

  private settle(job: Job, outcome: PoolOutcome): void {
    clearTimeout(job.timer)
    job.resolve(outcome)
  }

  private onExit(slot: Slot, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.closed) return
    this.options.log?.('extraction process ended', { pid: slot.child.pid, code, signal, busy: slot.job !== null })
    // A child that dies before it ever started would die again at once: give it a moment.
    const delayMs = slot.ready ? 0 : 1000
    if (slot === this.standby) {
      this.standby = null
      setTimeout(() => {
        if (!this.closed && !this.standby) this.standby = this.spawn()
      }, delayMs).unref()
      return
    }
    const index = this.slots.indexOf(slot)
    if (index >= 0) this.replace(slot, index, { reason: 'ResourceLimit', message: DIED }, delayMs)
  }

  /**
   * End the slot's sync and replace its child: a busy child cannot be interrupted any other way.
   * A sync whose body was not even parsed by its deadline never got to extraction: the processes
   * were too busy (parsing a large body on a loaded machine), which is overload, not the
   * profile's doing, and without its parent there is no status to put a condition in.
   */
  private abort(slot: Slot, reason: StopReason, message: string): void {
    const index = this.slots.indexOf(slot)
    if (index < 0) return
    void stopSlot(slot)
    if (reason === 'EvaluationTimeout' && slot.job && !slot.job.parent) {
      this.replace(slot, index, { kind: 'busy', message: `the sync was not parsed within ${this.options.timeoutMs} ms of its arrival` }, 0)
    } else this.replace(slot, index, { reason, message }, 0)
  }

  private replace(slot: Slot, index: number, stop: { reason: StopReason; message: string } | PoolOutcome, delayMs: number, record = true): void {
    const job = slot.job
    slot.job = null
    if (job) this.release(job, record)
    if (delayMs === 0) this.slots[index] = this.successor(slot.reserve)
    else {
      this.slots.splice(index, 1)
      setTimeout(() => {
        if (this.closed) return
        this.slots.push(assignRole(this.spawn(), slot.reserve))
        this.pump()
      }, delayMs).unref()
    }
    if (job) job.resolve('kind' in stop ? stop : { kind: 'aborted', ...stop, parent: job.parent })
    this.pump()
  }

  /** The standby if it has started (a new one starts behind it), else a new child. */
  private successor(reserve: boolean): Slot {
    const standby = this.standby
    if (!standby?.ready) return assignRole(this.spawn(), reserve)
    this.standby = this.spawn()
    return assignRole(standby, reserve)
  }

  private release(job: Job, record = true): void {
    clearTimeout(job.timer)
    this.queue.finished(job, record)
  }
}
