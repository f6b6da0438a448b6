import { buildSnapshot, canonicalJson, itemHash, itemKey, refKey, seedItemHash, sha256 } from '../api/canonical.js'
import type {
  ExporterClient, FinalizeResult, InventoryComposition, InventoryExportState, Item, ObjectRef, ReportResult, ResolvedSink,
  SinkCheck, SinkExportState, Snapshot, TargetReport,
} from '../api/types.js'
import { ItemBudget, UNBOUNDED, type BudgetLimit, type BudgetOptions } from './budget.js'
import { formatDuration } from '../api/duration.js'
import { driftMessage, driftSettings } from './drift.js'
import type { PendingJournal } from './pending-journal.js'
import { DEFAULT_BACKOFF, isPermanent, maxRetryDelayMs, retryUntilDone, type BackoffPolicy } from './retry.js'
import { isStaleItem, isStaleReport, type ReportStamp } from './report-order.js'
import type { DriftResult, Sink, WriteResult } from '../sinks/sink.js'

export interface Clock {
  now(): number
  setTimeout(fn: () => void, ms: number): unknown
  clearTimeout(handle: unknown): void
}

export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
}

/** The embedded default sink: used by inventories that name no sinkRefs. */
export const DEFAULT_SINK: ObjectRef = { namespace: '', name: 'default' }

export interface ExportEvent {
  sink: ObjectRef
  inventory: ObjectRef
  result: 'success' | 'failure'
  durationMs: number
  written?: WriteResult
  error?: Error
}

export interface DriftEvent {
  sink: ObjectRef
  inventory: ObjectRef
  /** in-step: the record holds the export; drifted: it differs and is left (Report); repaired; error: the check failed. */
  result: 'in-step' | 'drifted' | 'repaired' | 'error'
  differences: number
}

export interface ExporterObserver {
  onExport?(event: ExportEvent): void
  onDrift?(event: DriftEvent): void
  onPendingChange?(pending: number): void
  /** The bytes of items held for a namespace's targets, and in total, after they changed. */
  onHeldChange?(namespace: string, namespaceBytes: number, totalBytes: number): void
  onReportRefused?(target: ObjectRef, limit: BudgetLimit): void
}

/** Finalized targets remembered, oldest forgotten first. */
const FINALIZED_TARGETS_KEPT = 10_000

/** How long a healthcheck answer is reused, and how long one may take. */
export const SINK_CHECK_TTL_MS = 30_000
export const SINK_CHECK_TIMEOUT_MS = 4_000

export interface ExporterOptions {
  /** Default cluster label, overridden per sink by spec.cluster. */
  cluster: string
  /** Build a sink for a KollectSink, or the embedded default when `resolved` is null. */
  createSink(resolved: ResolvedSink | null): Promise<Sink>
  clock?: Clock
  backoff?: BackoffPolicy
  observer?: ExporterObserver
  /** Bounds on the items held; unbounded when left out. */
  budget?: BudgetOptions
  /** Where exports that sinks still owe are kept across a restart; none when left out. */
  journal?: PendingJournal
  log?: (level: 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>) => void
}

interface TargetState {
  items: Map<string, Item>
  /** What the budget charged for items. */
  bytes: number
  /** Of the last accepted report: what orders the next one (isStaleReport), and what a stale one is told. */
  stamp: ReportStamp
  checksum: string
  /** metadata.generation of the held items that had one, by item key. */
  generations: Map<string, number>
}

interface SinkRuntime {
  ref: ObjectRef
  poolKey: string
  resolved: ResolvedSink | null
  pending: Snapshot | null
  confirmed: { checksum: string; itemCount: number; at: number } | null
  failing: string | null
  /** When the failing sink's next attempt starts at the latest. */
  retryAt: number | null
  running: Promise<void> | null
  abort: AbortController
  /** A drift check is owed: after the first confirmed export since start, then every interval. */
  verifyDue: boolean
  verified: boolean
  verifyTimer: unknown
  /** After a permanent error: the next attempt at the maximum backoff, unless a change comes first. */
  holdTimer: unknown
  /** What the last check found and left (policy Report); null when in step. */
  drift: DriftResult | null
}

interface InventoryRuntime {
  composition: InventoryComposition
  sinks: Map<string, SinkRuntime>
  desired: Snapshot | null
  firstPendingAt: number | null
  lastChangeAt: number
  timer: unknown
  /** When the armed timer fires; null when no change waits for the debounce. */
  dueAt: number | null
  finalizing: Promise<void> | null
  finalized: boolean
  /** The journal holds an export of this inventory that some sink still owes. */
  journaled: boolean
}

interface PooledSink {
  sink: Promise<Sink>
  refs: number
}

/**
 * Holds the latest items per target and the composition per inventory; debounces and writes
 * snapshots to each sink independently. Everything it decides is in memory: after a restart
 * the completeness gate keeps it from exporting until every target has reported again, and
 * each sink diffs against what it holds itself, so nothing is deleted downstream by accident.
 */
export class Exporter implements ExporterClient {
  private readonly targets = new Map<string, TargetState>()
  /** uid of each finalized target, so a sync still in flight at its finalize cannot bring it back. */
  private readonly finalizedTargets = new Map<string, string>()
  private readonly inventories = new Map<string, InventoryRuntime>()
  private readonly pool = new Map<string, PooledSink>()
  private readonly checks = new Map<string, { at: number; result: SinkCheck }>()
  private readonly clock: Clock
  private readonly backoff: BackoffPolicy
  private readonly budget: ItemBudget
  private closed = false

  constructor(private readonly options: ExporterOptions) {
    this.clock = options.clock ?? realClock
    this.backoff = options.backoff ?? DEFAULT_BACKOFF
    this.budget = new ItemBudget(options.budget ?? UNBOUNDED)
  }

  /** The configured bounds, in bytes. */
  get budgetBytes(): { exporter: number; namespace: number } {
    return { exporter: this.budget.maxBytes, namespace: this.budget.namespaceMaxBytes }
  }

  /**
   * Replaces the target's items, unless the report is older than the one held (Stale), or that
   * would take its namespace over its share or the exporter over its budget: then nothing changes
   * and the result says why. An item older than the held one (metadata.generation) keeps the held one.
   */
  async reportTarget(report: TargetReport): Promise<ReportResult> {
    const key = refKey(report.target)
    const finalizedUid = this.finalizedTargets.get(key)
    if (finalizedUid !== undefined) {
      if (report.uid === finalizedUid) {
        this.log('info', 'target report dropped: the target was finalized', { target: key, generation: report.generation, sequence: report.sequence })
        return { accepted: false, reason: 'Stale', message: 'the target was finalized; a report of it that arrives later was dropped as stale', heldGeneration: report.generation, heldChecksum: '' }
      }
      this.finalizedTargets.delete(key) // recreated under the same name
    }
    const previous = this.targets.get(key)
    if (previous && isStaleReport(previous.stamp, report)) {
      const { generation, sequence } = previous.stamp
      // The sequences are arrival times: the log may have them, status may not (it must not move with the clock).
      this.log('info', 'target report dropped: older than the one held', { target: key, generation: report.generation, sequence: report.sequence, heldGeneration: generation, heldSequence: sequence })
      return {
        accepted: false,
        reason: 'Stale',
        message: report.generation < generation
          ? `the exporter holds a report of generation ${generation}; this one, of generation ${report.generation}, was dropped as stale`
          : `the exporter holds a later report of generation ${generation}; this one, of the same generation but an earlier sync, was dropped as stale`,
        heldGeneration: generation,
        heldChecksum: previous.checksum,
      }
    }
    const items = new Map<string, Item>()
    const generations = new Map<string, number>()
    let staleItems = 0
    report.items.forEach((item, i) => {
      const k = itemKey(item)
      const old = previous?.items.get(k)
      const generation = report.itemGenerations?.[i]
      const heldGeneration = previous?.generations.get(k)
      if (old && isStaleItem(heldGeneration, generation)) {
        staleItems++
        items.set(k, old)
        generations.set(k, heldGeneration as number)
        return
      }
      if (typeof generation === 'number') generations.set(k, generation)
      const hash = report.itemHashes?.[i] ?? itemHash(item)
      // Keep the old object when nothing changed: its hash and rendered text are cached by identity.
      if (old && itemHash(old) === hash) items.set(k, old)
      else {
        seedItemHash(item, hash)
        items.set(k, item)
      }
    })
    // An object whose extraction failed keeps its last good item instead of vanishing downstream.
    for (const failed of report.failedKeys ?? []) {
      const old = previous?.items.get(failed)
      if (old && !items.has(failed)) {
        items.set(failed, old)
        const held = previous?.generations.get(failed)
        if (held !== undefined) generations.set(failed, held)
      }
    }
    // A periodic resync reports the same items: exporting nothing new must not flip status to Pending.
    const changed = !previous || previous.items.size !== items.size || [...items].some(([k, item]) => previous.items.get(k) !== item)
    const { bytes, forget } = this.budget.chargeReport(items.values())
    const before = previous?.bytes ?? 0
    const over = this.budget.check(report.target, before, bytes)
    if (over) {
      forget()
      this.options.observer?.onReportRefused?.(report.target, over)
      const refusal = this.budget.refusal(report.target, over, items.size, bytes)
      this.log('warn', 'target report refused: over the item budget', { target: key, limit: over, items: items.size, bytes })
      return refusal
    }
    const stamp: ReportStamp = { uid: report.uid, generation: report.generation, sequence: report.sequence }
    this.targets.set(key, { items, bytes, stamp, checksum: report.checksum, generations })
    this.charge(report.target, before, bytes)
    if (staleItems > 0) this.log('info', 'target report had items older than the held ones; kept the held ones', { target: key, staleItems, sequence: report.sequence })
    const accepted: ReportResult = staleItems > 0 ? { accepted: true, staleItems } : { accepted: true }
    if (!changed) return accepted
    for (const inv of this.inventories.values()) {
      if (inv.composition.targets.some((t) => refKey(t) === key)) this.markDirty(inv)
    }
    return accepted
  }

  async removeTarget(target: ObjectRef & { uid?: string }): Promise<void> {
    const key = refKey(target)
    if (target.uid) {
      this.finalizedTargets.delete(key)
      this.finalizedTargets.set(key, target.uid)
      // Only late syncs need it, and they come within a hook timeout: a bound keeps churn from growing it.
      if (this.finalizedTargets.size > FINALIZED_TARGETS_KEPT) this.finalizedTargets.delete(this.finalizedTargets.keys().next().value as string)
    }
    const previous = this.targets.get(key)
    if (!previous) return
    this.targets.delete(key)
    this.charge(target, previous.bytes, 0)
    for (const inv of this.inventories.values()) {
      if (inv.composition.targets.some((t) => refKey(t) === key)) this.markDirty(inv)
    }
  }

  async applyInventory(composition: InventoryComposition): Promise<InventoryExportState> {
    let inv = this.inventories.get(refKey(composition.inventory))
    if (!inv) {
      inv = this.addInventory(composition)
      this.markDirty(inv)
    } else if (canonicalJson(inv.composition) !== canonicalJson(composition)) {
      inv.composition = composition
      this.reconcileSinks(inv)
      this.markDirty(inv)
    }
    return this.state(inv)
  }

  async finalizeInventory(composition: InventoryComposition): Promise<FinalizeResult> {
    const key = refKey(composition.inventory)
    // An inventory deleted right after a restart was never applied here: its sinks come from the request.
    const inv = this.inventories.get(key) ?? this.addInventory(composition)
    if (inv.finalized) {
      const state = this.state(inv)
      this.dropInventory(key, inv)
      return { finalized: true, state }
    }
    if (!inv.finalizing) {
      this.clock.clearTimeout(inv.timer)
      inv.timer = null
      inv.dueAt = null
      inv.finalizing = this.runFinalize(inv).then(
        () => { inv.finalized = true },
        (err: Error) => {
          inv.finalizing = null
          this.log('warn', 'finalize failed; will retry on the next finalize call', { inventory: key, error: err.message })
        },
      )
    }
    await Promise.race([inv.finalizing, new Promise((r) => this.clock.setTimeout(() => r(undefined), 2000))])
    if (inv.finalized) {
      const state = this.state(inv)
      this.dropInventory(key, inv)
      return { finalized: true, state }
    }
    return { finalized: false, state: this.state(inv) }
  }

  /**
   * Runs the sink's healthcheck, on the pooled instance when an inventory uses the sink, else on a
   * short-lived one. Answers are reused for a while: Metacontroller resyncs sinks periodically.
   */
  async checkSink(resolved: ResolvedSink): Promise<SinkCheck> {
    const poolKey = poolKeyOf(resolved)
    const cached = this.checks.get(poolKey)
    if (cached && this.clock.now() - cached.at < SINK_CHECK_TTL_MS) return cached.result
    let temporary: Promise<Sink> | null = null
    let result: SinkCheck
    try {
      const sink = await (this.pool.get(poolKey)?.sink ?? (temporary = this.options.createSink(resolved)))
      await withTimeout(sink.healthcheck(), SINK_CHECK_TIMEOUT_MS, `no answer within ${SINK_CHECK_TIMEOUT_MS} ms`)
      result = { reachable: true, message: '' }
    } catch (err) {
      result = { reachable: false, message: (err as Error).message }
    }
    if (temporary) void temporary.then((s) => s.close()).catch(() => undefined)
    this.checks.set(poolKey, { at: this.clock.now(), result })
    if (this.checks.size > 1000) this.checks.delete(this.checks.keys().next().value as string)
    return result
  }

  /** Current export state of an inventory, or null when the exporter has not seen it. */
  inventoryState(inventory: ObjectRef): InventoryExportState | null {
    const inv = this.inventories.get(refKey(inventory))
    return inv ? this.state(inv) : null
  }

  /** Resolves when no sink has work in flight or queued (for tests and graceful shutdown). */
  async idle(): Promise<void> {
    for (;;) {
      const running = [...this.inventories.values()].flatMap((inv) => [...inv.sinks.values()].map((s) => s.running)).filter(Boolean)
      if (running.length === 0) return
      await Promise.allSettled(running)
    }
  }

  /** Export now every inventory whose debounce timer is armed (graceful shutdown, tests). */
  flush(): void {
    for (const inv of this.inventories.values()) {
      if (inv.timer !== null) {
        this.clock.clearTimeout(inv.timer)
        inv.timer = null
        inv.dueAt = null
        this.exportNow(inv)
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true
    for (const inv of this.inventories.values()) {
      this.clock.clearTimeout(inv.timer)
      for (const s of inv.sinks.values()) this.stopRuntime(s)
    }
    await Promise.allSettled([...this.inventories.values()].flatMap((inv) => [...inv.sinks.values()].map((s) => s.running)))
    await Promise.allSettled([...this.pool.values()].map(async (p) => (await p.sink).close()))
    this.pool.clear()
  }

  /**
   * Resume the exports the journal says sinks still owe, before any target re-reports: each
   * inventory comes back with its composition and snapshot, and only its owing sinks write.
   * Call before the exporter takes requests; an inventory it already knows is left alone.
   */
  async restorePending(): Promise<number> {
    const journal = this.options.journal
    if (!journal) return 0
    const { entries, problems } = await journal.load()
    for (const problem of problems) this.log('warn', 'skipped an unreadable pending export', { problem })
    let restored = 0
    for (const entry of entries) {
      const key = refKey(entry.composition.inventory)
      if (this.inventories.has(key)) continue
      const inv = this.addInventory(entry.composition)
      inv.desired = entry.snapshot
      inv.journaled = true
      for (const sinkKey of entry.sinks) {
        const rt = inv.sinks.get(sinkKey)
        if (!rt) continue
        rt.pending = entry.snapshot
        this.drive(inv, rt)
        restored++
      }
      this.log('info', 'resuming a pending export from the journal', { inventory: key, checksum: entry.snapshot.checksum, sinks: entry.sinks })
    }
    this.options.observer?.onPendingChange?.(this.pendingCount())
    return restored
  }

  /** Write every export a sink still owes to the journal (shutdown); resolves with how many inventories. */
  async savePending(): Promise<number> {
    const owing = [...this.inventories.values()].filter((inv) => !inv.finalizing && [...inv.sinks.values()].some((rt) => rt.pending))
    await Promise.all(owing.map((inv) => this.journalize(inv)))
    return owing.length
  }

  pendingCount(): number {
    let n = 0
    for (const inv of this.inventories.values()) for (const s of inv.sinks.values()) if (s.pending) n++
    return n
  }

  // ---- internals ----

  private charge(target: ObjectRef, before: number, after: number): void {
    if (before === after) return
    this.budget.move(target, before, after)
    this.options.observer?.onHeldChange?.(target.namespace, this.budget.namespaceBytes(target.namespace), this.budget.totalBytes)
  }

  private addInventory(composition: InventoryComposition): InventoryRuntime {
    const inv: InventoryRuntime = { composition, sinks: new Map(), desired: null, firstPendingAt: null, lastChangeAt: 0, timer: null, dueAt: null, finalizing: null, finalized: false, journaled: false }
    this.inventories.set(refKey(composition.inventory), inv)
    this.reconcileSinks(inv)
    return inv
  }

  private sinkRefs(c: InventoryComposition): { ref: ObjectRef; resolved: ResolvedSink | null }[] {
    if (c.sinks.length === 0) return c.useDefaultSink === false ? [] : [{ ref: DEFAULT_SINK, resolved: null }]
    return c.sinks.map((s) => ({ ref: { namespace: s.namespace, name: s.name }, resolved: s }))
  }

  /** Keep one runtime per sink of the composition; a changed sink spec gets a fresh sink. */
  private reconcileSinks(inv: InventoryRuntime): void {
    const wanted = new Map(this.sinkRefs(inv.composition).map((s) => [refKey(s.ref), s]))
    for (const [key, rt] of inv.sinks) {
      const w = wanted.get(key)
      if (!w || poolKeyOf(w.resolved) !== rt.poolKey) {
        this.stopRuntime(rt)
        this.release(rt.poolKey)
        inv.sinks.delete(key)
      }
    }
    for (const [key, w] of wanted) {
      if (inv.sinks.has(key)) continue
      const poolKey = poolKeyOf(w.resolved)
      this.acquire(poolKey, w.resolved)
      inv.sinks.set(key, {
        ref: w.ref, poolKey, resolved: w.resolved, pending: null, confirmed: null, failing: null, retryAt: null, running: null, abort: new AbortController(),
        verifyDue: false, verified: false, verifyTimer: null, holdTimer: null, drift: null,
      })
    }
  }

  private acquire(poolKey: string, resolved: ResolvedSink | null): void {
    const pooled = this.pool.get(poolKey)
    if (pooled) {
      pooled.refs++
      return
    }
    const sink = this.options.createSink(resolved)
    sink.catch(() => undefined) // surfaced per write, where the sink's state records it
    this.pool.set(poolKey, { sink, refs: 1 })
  }

  private release(poolKey: string): void {
    const pooled = this.pool.get(poolKey)
    if (!pooled || --pooled.refs > 0) return
    this.pool.delete(poolKey)
    pooled.sink.then((s) => s.close()).catch(() => undefined)
  }

  private markDirty(inv: InventoryRuntime): void {
    if (inv.composition.suspend) {
      // A suspended inventory exports nothing, including a change already waiting for its debounce.
      this.clock.clearTimeout(inv.timer)
      inv.timer = null
      inv.dueAt = null
      inv.firstPendingAt = null
      return
    }
    if (this.closed || inv.finalizing) return
    const now = this.clock.now()
    inv.lastChangeAt = now
    inv.firstPendingAt ??= now
    const due = Math.min(now + inv.composition.debounceMs, inv.firstPendingAt + inv.composition.maxWaitMs)
    this.clock.clearTimeout(inv.timer)
    inv.dueAt = Math.max(now, due)
    inv.timer = this.clock.setTimeout(() => {
      inv.timer = null
      inv.dueAt = null
      this.exportNow(inv)
    }, inv.dueAt - now)
  }

  private missingTargets(c: InventoryComposition): ObjectRef[] {
    return c.targets.filter((t) => !this.targets.has(refKey(t)))
  }

  private exportNow(inv: InventoryRuntime): void {
    if (inv.composition.suspend || inv.finalizing) return
    if (this.missingTargets(inv.composition).length > 0) {
      // Completeness gate: the next report of a missing target marks the inventory dirty again.
      inv.firstPendingAt = null
      return
    }
    inv.firstPendingAt = null
    const items: Item[] = []
    for (const t of inv.composition.targets) for (const item of (this.targets.get(refKey(t)) as TargetState).items.values()) items.push(item)
    const snapshot = buildSnapshot(inv.composition.inventory, this.options.cluster, items)
    inv.desired = snapshot
    for (const rt of inv.sinks.values()) {
      if (rt.confirmed?.checksum === snapshot.checksum && !rt.pending) continue
      rt.pending = snapshot
      this.drive(inv, rt)
    }
    this.options.observer?.onPendingChange?.(this.pendingCount())
  }

  /**
   * One writer per sink runtime: it always writes the newest pending snapshot, retrying with
   * backoff, and runs the sink's drift checks between writes, so a check never sees half an export.
   */
  private drive(inv: InventoryRuntime, rt: SinkRuntime): void {
    if (rt.running) return
    this.clock.clearTimeout(rt.holdTimer)
    rt.holdTimer = null
    const run = async () => {
      while (!rt.abort.signal.aborted) {
        if (!rt.pending) {
          if (!rt.verifyDue) return
          await this.verify(inv, rt)
          continue
        }
        const snapshot = rt.pending
        const started = this.clock.now()
        try {
          const written = await retryUntilDone(async () => {
            const latest = rt.pending ?? snapshot
            const sink = await this.sinkFor(rt)
            const result = await sink.write(this.forSink(latest, rt.resolved))
            return { latest, result }
          }, {
            policy: this.backoff,
            signal: rt.abort.signal,
            onFailedAttempt: (error, attempt) => {
              rt.failing = error.message
              rt.retryAt = this.clock.now() + maxRetryDelayMs(this.backoff, attempt)
              // A crash from here on must not lose the export: a restart resumes it from the journal.
              if (attempt === 1) void this.journalize(inv)
              this.options.observer?.onExport?.({ sink: rt.ref, inventory: inv.composition.inventory, result: 'failure', durationMs: this.clock.now() - started, error })
              if (isPermanent(error)) this.log('warn', 'sink write failed with a permanent error; waiting for a change or the maximum backoff', { sink: refKey(rt.ref), inventory: refKey(inv.composition.inventory), attempt, error: error.message })
              else this.log(attempt === 1 ? 'warn' : 'info', 'sink write failed; retrying', { sink: refKey(rt.ref), inventory: refKey(inv.composition.inventory), attempt, error: error.message })
            },
          })
          rt.confirmed = { checksum: written.latest.checksum, itemCount: written.latest.itemCount, at: this.clock.now() }
          rt.failing = null
          rt.retryAt = null
          if (rt.pending === written.latest) rt.pending = null
          // The first export since start, or one after drift was found: check the record now.
          if (!rt.verified || rt.drift) rt.verifyDue = true
          this.options.observer?.onExport?.({ sink: rt.ref, inventory: inv.composition.inventory, result: 'success', durationMs: this.clock.now() - started, written: written.result })
          if (inv.journaled) this.settleJournal(inv)
        } catch (err) {
          if (rt.abort.signal.aborted) return
          if (isPermanent(err)) {
            this.hold(inv, rt, err)
            return
          }
          this.log('error', 'sink writer stopped', { sink: refKey(rt.ref), error: (err as Error).message })
          return
        }
      }
    }
    rt.running = run().finally(() => {
      rt.running = null
      this.options.observer?.onPendingChange?.(this.pendingCount())
      // Work that arrived while the loop was ending would otherwise wait for the next event.
      if ((rt.pending || rt.verifyDue) && !rt.abort.signal.aborted && !rt.failing) this.drive(inv, rt)
    })
  }

  /**
   * Compare what the sink holds with the export it confirmed, and repair or report by its drift
   * policy. Only a confirmed, current export is checked: a pending one is still being written.
   */
  private async verify(inv: InventoryRuntime, rt: SinkRuntime): Promise<void> {
    rt.verifyDue = false
    const settings = driftSettings(rt.resolved)
    const snapshot = inv.desired
    if (!settings.mode || !snapshot || rt.confirmed?.checksum !== snapshot.checksum) return
    const event = { sink: rt.ref, inventory: inv.composition.inventory }
    const fields = { sink: refKey(rt.ref), inventory: refKey(inv.composition.inventory) }
    let sink: Sink
    try {
      sink = await this.sinkFor(rt)
    } catch {
      return // the next write reports why the sink cannot be built
    }
    if (!sink.verify) {
      rt.verified = true // an event stream keeps no record to drift
      return
    }
    try {
      const result = await sink.verify(this.forSink(snapshot, rt.resolved), settings.mode)
      rt.verified = true
      rt.drift = result.differences > 0 && !result.repaired ? result : null
      if (result.repaired) {
        rt.confirmed = { ...rt.confirmed, at: this.clock.now() }
        this.log('warn', 'repaired drift: the sink held changes made outside Kollect', { ...fields, differences: result.differences, examples: result.examples })
      } else if (rt.drift) {
        this.log('warn', 'drift found: the sink holds changes made outside Kollect', { ...fields, differences: result.differences, examples: result.examples })
      }
      this.options.observer?.onDrift?.({ ...event, result: result.repaired ? 'repaired' : rt.drift ? 'drifted' : 'in-step', differences: result.differences })
    } catch (err) {
      if (rt.abort.signal.aborted) return
      this.log('warn', 'drift check failed; it runs again at the next interval', { ...fields, error: (err as Error).message })
      this.options.observer?.onDrift?.({ ...event, result: 'error', differences: 0 })
    } finally {
      if (!rt.abort.signal.aborted) {
        this.clock.clearTimeout(rt.verifyTimer)
        rt.verifyTimer = this.clock.setTimeout(() => {
          rt.verifyTimer = null
          rt.verifyDue = true
          this.drive(inv, rt)
        }, settings.intervalMs)
      }
    }
  }

  /**
   * A permanent error: retrying at once cannot help, so the writer waits at the maximum backoff.
   * A change of the inventory's items or of the sink's spec drives it again at once.
   */
  private hold(inv: InventoryRuntime, rt: SinkRuntime, err: Error): void {
    const waitMs = this.backoff.maxMs
    rt.failing = `${err.message} (permanent: tried again in ${formatDuration(waitMs)}, or at once when the sink or the inventory changes)`
    rt.retryAt = this.clock.now() + waitMs
    rt.holdTimer = this.clock.setTimeout(() => {
      rt.holdTimer = null
      if (!rt.abort.signal.aborted) this.drive(inv, rt)
    }, waitMs)
  }

  private stopRuntime(rt: SinkRuntime): void {
    rt.abort.abort()
    this.clock.clearTimeout(rt.verifyTimer)
    rt.verifyTimer = null
    this.clock.clearTimeout(rt.holdTimer)
    rt.holdTimer = null
  }

  /** A sink confirmed: the journal entry goes once no sink owes the export, else it lists fewer sinks. */
  private settleJournal(inv: InventoryRuntime): void {
    if ([...inv.sinks.values()].some((s) => s.pending)) {
      void this.journalize(inv)
      return
    }
    inv.journaled = false
    void this.options.journal?.remove(inv.composition.inventory).catch((err: Error) => this.log('warn', 'could not remove a pending export from the journal', { error: err.message }))
  }

  private async journalize(inv: InventoryRuntime): Promise<void> {
    const journal = this.options.journal
    const owing = [...inv.sinks.entries()].filter(([, rt]) => rt.pending)
    // The newest snapshot is what every owing sink writes next: a writer always takes the latest.
    const snapshot = inv.desired
    if (!journal || !snapshot || owing.length === 0) return
    // Set before the write: a confirmation or a finalize meanwhile queues its update behind it.
    inv.journaled = true
    try {
      await journal.save({ composition: inv.composition, snapshot, sinks: owing.map(([key]) => key) })
    } catch (err) {
      this.log('error', 'could not save a pending export to the journal', { inventory: refKey(inv.composition.inventory), error: (err as Error).message })
    }
  }

  /** The pooled sink; a failed creation (missing secret, bad config) is tried again next time. */
  private async sinkFor(rt: SinkRuntime): Promise<Sink> {
    const pooled = this.pool.get(rt.poolKey) as PooledSink
    const attempt = pooled.sink
    try {
      return await attempt
    } catch (err) {
      if (pooled.sink === attempt) {
        pooled.sink = this.options.createSink(rt.resolved)
        pooled.sink.catch(() => undefined)
      }
      throw err
    }
  }

  private forSink(snapshot: Snapshot, resolved: ResolvedSink | null): Snapshot {
    const cluster = resolved?.spec.cluster
    return cluster && cluster !== snapshot.cluster ? { ...snapshot, cluster } : snapshot
  }

  private async runFinalize(inv: InventoryRuntime): Promise<void> {
    // Stop writers first, so a retrying write cannot land after the delete.
    for (const rt of inv.sinks.values()) this.stopRuntime(rt)
    await Promise.allSettled([...inv.sinks.values()].map((rt) => rt.running))
    const failures: string[] = []
    await Promise.all([...inv.sinks.values()].map(async (rt) => {
      rt.pending = null
      if ((rt.resolved?.spec.deletionPolicy ?? 'Retain') !== 'Delete') return
      try {
        const sink = await this.sinkFor(rt)
        await sink.remove(inv.composition.inventory, rt.resolved?.spec.cluster || this.options.cluster)
        rt.failing = null
      } catch (err) {
        rt.failing = (err as Error).message
        failures.push(`${refKey(rt.ref)}: ${(err as Error).message}`)
      }
    }))
    for (const rt of inv.sinks.values()) rt.abort = new AbortController()
    if (failures.length > 0) throw new Error(failures.join('; '))
    if (inv.journaled) {
      inv.journaled = false
      await this.options.journal?.remove(inv.composition.inventory)
    }
  }

  private dropInventory(key: string, inv: InventoryRuntime): void {
    this.clock.clearTimeout(inv.timer)
    for (const rt of inv.sinks.values()) {
      this.stopRuntime(rt)
      this.release(rt.poolKey)
    }
    this.inventories.delete(key)
  }

  private state(inv: InventoryRuntime): InventoryExportState {
    const missing = this.missingTargets(inv.composition)
    const sinks: SinkExportState[] = [...inv.sinks.values()]
      .map((rt): SinkExportState => {
        const s: SinkExportState = {
          namespace: rt.ref.namespace,
          name: rt.ref.name,
          state: rt.failing ? 'Failing' : rt.pending || !rt.confirmed || (inv.desired && rt.confirmed.checksum !== inv.desired.checksum) ? 'Pending' : rt.drift ? 'Drifted' : 'Synced',
          checksum: rt.confirmed?.checksum ?? '',
          itemCount: rt.confirmed?.itemCount ?? 0,
          message: rt.failing ?? (rt.confirmed ? (rt.drift && !rt.pending ? driftMessage(rt.drift, driftSettings(rt.resolved).intervalMs) : '') : rt.pending && inv.journaled ? 'resuming the export pending at the last shutdown' : missing.length > 0 ? 'waiting for targets to report' : inv.composition.suspend ? 'suspended' : 'waiting for the first export'),
        }
        if (rt.confirmed) s.lastExportTime = new Date(rt.confirmed.at).toISOString().replace(/\.\d{3}Z$/, 'Z')
        return s
      })
      .sort((a, b) => compareRefs(a, b))
    const times = sinks.map((s) => s.lastExportTime).filter((t): t is string => !!t).sort()
    const state: InventoryExportState = {
      complete: missing.length === 0,
      missingTargets: missing,
      itemCount: inv.desired?.itemCount ?? 0,
      checksum: inv.desired?.checksum ?? '',
      sinks,
    }
    const last = times[times.length - 1]
    if (last) state.lastExportTime = last
    if (inv.dueAt !== null) state.pending = true
    // A retry time already passed means an attempt is running: its end is unknown, so it is left out.
    const now = this.clock.now()
    const next = [inv.dueAt, ...[...inv.sinks.values()].map((rt) => (rt.failing && rt.retryAt !== null && rt.retryAt > now ? rt.retryAt : null))]
      .filter((t): t is number => t !== null)
    if (next.length > 0) state.nextChangeInMs = Math.max(0, Math.min(...next) - now)
    return state
  }

  private log(level: 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>): void {
    this.options.log?.(level, msg, fields)
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(message)), ms) })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

function compareRefs(a: ObjectRef, b: ObjectRef): number {
  if (a.namespace !== b.namespace) return a.namespace < b.namespace ? -1 : 1
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0
}

function poolKeyOf(resolved: ResolvedSink | null): string {
  return resolved ? `${refKey(resolved)}#${sha256(canonicalJson(resolved.spec))}` : 'embedded/default'
}
