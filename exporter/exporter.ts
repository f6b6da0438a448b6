import { buildSnapshot, canonicalJson, refKey } from '../api/canonical.js'
import { parsedReport } from '../api/report.js'
import type {
  ExporterClient, FinalizeResult, HeldReport, InventoryComposition, InventoryExportState, Item, ObjectRef, ReportResult, ResolvedSink,
  SerialisedReport, SinkCheck, TargetReport,
} from '../api/types.js'
import type { FencingToken } from '../sinks/fence.js'
import { LeaseFence } from './fence.js'
import { JournalKeeper } from './journaling.js'
import { boundedClock, realClock, type Clock, type ExporterOptions, type SinkPending } from './options.js'
import { SinkPool } from './pool.js'
import { DEFAULT_BACKOFF } from './retry.js'
import { Inventory, type InventoryDeps } from './inventory.js'
import { exportState } from './state.js'
import type { DriverContext } from './strategy.js'
import { TargetStore } from './targets.js'

/**
 * Holds the latest items per target and the composition per inventory; debounces and writes
 * snapshots to each sink independently. Everything it decides is in memory: after a restart
 * the completeness gate keeps it from exporting until every target has reported again, and
 * each sink diffs against what it holds itself, so nothing is deleted downstream by accident.
 * This facade wires the parts: targets.ts, inventory.ts (its debounce, schedule.ts, and one
 * sink-driver.ts per sink), pool.ts, state.ts, journaling.ts.
 */
export class Exporter implements ExporterClient {
  private readonly inventories = new Map<string, Inventory>()
  private readonly clock: Clock
  private readonly targets: TargetStore
  private readonly pool: SinkPool
  private readonly deps: InventoryDeps
  private readonly journal: JournalKeeper
  private readonly fence: LeaseFence
  private closed = false
  /** Only an active exporter writes to sinks; a standby holds reports and compositions only. */
  private active: boolean

  constructor(private readonly options: ExporterOptions) {
    this.clock = boundedClock(options.clock ?? realClock)
    this.active = !options.standby
    this.fence = new LeaseFence(options.renewDeadlineMs, () => this.clock.monotonic?.() ?? this.clock.now())
    const log = this.log.bind(this)
    this.targets = new TargetStore(options.budget, options.observer, log)
    this.pool = new SinkPool(options.createSink, this.clock, options.checkGrant)
    this.journal = new JournalKeeper(options.journal, log, options.observer)
    const ctx: DriverContext = {
      clock: this.clock,
      backoff: options.backoff ?? DEFAULT_BACKOFF,
      observer: options.observer,
      log,
      mayWrite: () => this.fence.holds(),
      fence: this.fence,
    }
    this.deps = {
      ctx,
      pool: this.pool,
      events: (inv) => ({
        failing: () => void this.journal.save(inv),
        confirmed: () => this.journal.settle(inv),
        stopped: () => this.pendingChanged(),
      }),
      due: (inv) => this.exportNow(inv),
    }
  }

  /** The configured bounds, in bytes. */
  get budgetBytes(): { exporter: number; namespace: number } {
    return this.targets.budgetBytes
  }

  /**
   * Replaces the target's items, unless the report is older than the one held (Stale), or that
   * would take its namespace over its share or the exporter over its budget: then nothing changes
   * and the result says why. An item older than the held one (metadata.generation) keeps the held one.
   */
  readonly takesChanges = true

  async reportTarget(sent: TargetReport | SerialisedReport): Promise<ReportResult> {
    const report = parsedReport(sent)
    const { result, changed } = this.targets.report(report)
    if (changed) this.targetChanged(report.target)
    return result
  }

  async holdsReport(report: HeldReport): Promise<boolean> {
    return this.targets.holds(report)
  }

  async removeTarget(target: ObjectRef & { uid?: string }): Promise<void> {
    if (this.targets.remove(target)) this.targetChanged(target)
  }

  async applyInventory(composition: InventoryComposition): Promise<InventoryExportState> {
    let inv = this.inventories.get(refKey(composition.inventory))
    if (!inv) {
      inv = this.addInventory(composition)
      this.dirty(inv)
    } else if (canonicalJson(inv.composition) !== canonicalJson(composition)) {
      inv.recompose(composition)
      this.dirty(inv)
    }
    return this.state(inv)
  }

  async finalizeInventory(composition: InventoryComposition): Promise<FinalizeResult> {
    const key = refKey(composition.inventory)
    // An inventory deleted right after a restart was never applied here: its sinks come from the request.
    const inv = this.inventories.get(key) ?? this.addInventory(composition)
    if (!this.active && !inv.finalizing) {
      // A standby deletes nothing (the holder runs a Delete policy) but forgets the inventory, so
      // a takeover does not export it again. Not finalized: Metacontroller retries until the holder answers.
      const state = this.state(inv)
      this.dropInventory(key, inv)
      return { finalized: false, state }
    }
    if (inv.finalized) return this.finished(key, inv)
    const finalizing = inv.beginFinalize(() => this.runFinalize(inv), (err) => {
      this.log('warn', 'finalize failed; will retry on the next finalize call', { inventory: key, error: err.message })
    })
    await Promise.race([finalizing, new Promise((r) => this.clock.setTimeout(() => r(undefined), 2000))])
    if (inv.finalized) return this.finished(key, inv)
    return { finalized: false, state: this.state(inv) }
  }

  /**
   * Runs the sink's healthcheck, on the pooled instance when an inventory uses the sink, else on a
   * short-lived one. Answers are reused for a while: Metacontroller resyncs sinks periodically.
   */
  checkSink(resolved: ResolvedSink): Promise<SinkCheck> {
    return this.pool.check(resolved)
  }

  /** Current export state of an inventory, or null when the exporter has not seen it. */
  inventoryState(inventory: ObjectRef): InventoryExportState | null {
    const inv = this.inventories.get(refKey(inventory))
    return inv ? this.state(inv) : null
  }

  /** Resolves when no sink has work in flight or queued (for tests and graceful shutdown). */
  async idle(): Promise<void> {
    for (;;) {
      const busy = this.drivers().filter((d) => d.busy)
      if (busy.length === 0) return
      await Promise.allSettled(busy.map((d) => d.settled))
    }
  }

  /** Export now every inventory whose debounce timer is armed (graceful shutdown, tests). */
  flush(): void {
    for (const inv of this.inventories.values()) inv.debounce.flush()
  }

  async close(): Promise<void> {
    this.closed = true
    for (const inv of this.inventories.values()) {
      inv.debounce.cancel()
      for (const d of inv.drivers) d.stop()
    }
    await Promise.allSettled(this.drivers().map((d) => d.settled))
    // A confirmation's journal update is not awaited by its writer: a closed exporter writes nothing more.
    await this.journal.journal?.drain()
    await this.pool.close()
  }

  /**
   * Read the exports the journal says sinks still owe, before any target re-reports: each
   * inventory comes back with its composition, and status says what it owes. Nothing is written
   * until the completeness gate passes; then the fresh snapshot is written, and the journaled one
   * is dropped when it differs (JournalKeeper). Resolves with the number of owing sinks.
   */
  async restorePending(): Promise<number> {
    const journal = this.journal.journal
    if (!journal || !this.active) return 0
    const { entries, problems } = await journal.load()
    this.journal.unreadable(problems)
    let restored = 0
    for (const entry of entries) {
      const { snapshot } = entry
      const known = this.inventories.get(refKey(entry.composition.inventory))
      this.journal.keepConfirmed(entry)
      if (known) this.journal.restoreConfirmed(known)
      if (snapshot) restored += this.journal.seed(known ?? this.addInventory(entry.composition), { ...entry, snapshot })
    }
    return restored
  }

  /**
   * Write every export a sink still owes to the journal (shutdown): how many inventories were
   * saved, and the ones that could not be (a full disk), with the first reason.
   */
  async savePending(): Promise<{ saved: number; failed: number; error?: string }> {
    const owing = [...this.inventories.values()].filter((inv) => !inv.finalizing && inv.drivers.some((d) => d.owes))
    const errors = (await Promise.all(owing.map((inv) => this.journal.save(inv)))).filter((e) => e !== undefined)
    return { saved: owing.length - errors.length, failed: errors.length, ...(errors[0] ? { error: errors[0].message } : {}) }
  }

  get isActive(): boolean {
    return this.active
  }

  /**
   * Leadership changed. Losing it stops every writer at once (an in-flight sink call finishes,
   * then the loop sees the abort) and drops what was owed: the next holder computes it again.
   * Gaining it exports every inventory now, past the debounce, through the completeness gate:
   * the state came in while standing by. What the last holder confirmed is unknown here, so
   * every sink is written; each diffs against what it holds, so an unchanged export changes nothing.
   */
  setActive(active: boolean): void {
    if (active === this.active || this.closed) return
    this.active = active
    for (const inv of this.inventories.values()) {
      for (const d of inv.drivers) {
        if (active) d.activate()
        else d.standBy()
      }
      if (active && !inv.finalizing && !inv.finalized) {
        inv.debounce.cancel()
        this.exportNow(inv)
      }
    }
    this.pendingChanged()
  }

  /**
   * The elector renewed the Lease in a round begun at `at` (monotonic): fenced writers go on.
   * `token` names the Lease and this holder's epoch, which stores that can keep it compare.
   */
  leaseRenewed(at: number, token?: FencingToken): void {
    this.fence.renewed(at, token)
    if (!this.active || this.closed) return
    for (const d of this.drivers()) d.renewed()
  }

  pendingCount(): number {
    return this.drivers().filter((d) => d.owes).length
  }

  // ---- internals ----

  private pendingChanged(): void {
    const observer = this.options.observer
    if (!observer?.onPendingChange) return
    const bySink = new Map<string, SinkPending>()
    for (const d of this.drivers()) {
      const entry = bySink.get(refKey(d.ref)) ?? { sink: d.ref, pending: 0 }
      if (d.owes) entry.pending++
      bySink.set(refKey(d.ref), entry)
    }
    observer.onPendingChange(this.pendingCount(), [...bySink.values()])
  }

  private targetChanged(target: ObjectRef): void {
    const key = refKey(target)
    for (const inv of this.inventories.values()) {
      if (inv.composition.targets.some((t) => refKey(t) === key)) this.dirty(inv)
    }
  }

  private dirty(inv: Inventory): void {
    inv.debounce.dirty(inv.composition, this.closed || inv.finalizing !== null)
  }

  private drivers() {
    return [...this.inventories.values()].flatMap((inv) => inv.drivers)
  }

  private addInventory(composition: InventoryComposition): Inventory {
    const inv = new Inventory(composition, this.deps)
    this.inventories.set(refKey(composition.inventory), inv)
    this.journal.restoreConfirmed(inv)
    return inv
  }

  private missingTargets(c: InventoryComposition): ObjectRef[] {
    return c.targets.filter((t) => !this.targets.has(t))
  }

  private exportNow(inv: Inventory): void {
    if (!inv.debounce.gate(inv.composition, inv.finalizing !== null, this.missingTargets(inv.composition).length) || !this.active) return
    const items: Item[] = []
    for (const t of inv.composition.targets) for (const item of this.targets.items(t)) items.push(item)
    const snapshot = buildSnapshot(inv.composition.inventory, this.options.cluster, items)
    this.journal.resolve(inv, snapshot)
    inv.export(snapshot)
    this.pendingChanged()
  }

  private async runFinalize(inv: Inventory): Promise<void> {
    // A standby writes nothing, deletes included: the finalize call is retried until it reaches the holder.
    if (!this.active) throw new Error('this exporter is a standby; the lease holder finalizes')
    if (!this.fence.holds()) throw new Error('the lease was not renewed within the renew deadline; the finalize waits for a renewal')
    await inv.finalizeSinks(this.options.cluster)
    await this.journal.forget(inv)
  }

  /** The state the finalize answer carries, then the inventory is forgotten. */
  private finished(key: string, inv: Inventory): FinalizeResult {
    const state = this.state(inv)
    this.dropInventory(key, inv)
    return { finalized: true, state }
  }

  private dropInventory(key: string, inv: Inventory): void {
    inv.dispose()
    this.inventories.delete(key)
  }

  private state(inv: Inventory): InventoryExportState {
    return exportState(inv, this.missingTargets(inv.composition), this.journal.resumedSinks(inv), this.clock.now())
  }

  private log(level: 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>): void {
    this.options.log?.(level, msg, fields)
  }
}
