import { refKey } from '../api/canonical.js'
import type { InventoryComposition, ObjectRef, ResolvedSink, Snapshot } from '../api/types.js'
import { DEFAULT_SINK } from './options.js'
import { poolKeyOf, type SinkPool } from './pool.js'
import { Debounce } from './schedule.js'
import { SinkDriver, type DriverEvents } from './sink-driver.js'
import type { DriverContext } from './strategy.js'

export interface InventoryDeps {
  ctx: DriverContext
  pool: SinkPool
  /** What the inventory's drivers tell the exporter (its journal, its pending gauge). */
  events: (inv: Inventory) => DriverEvents
  /** The debounce ran out: export if the gate lets it. */
  due: (inv: Inventory) => void
}

function sinkRefs(c: InventoryComposition): { ref: ObjectRef; resolved: ResolvedSink | null }[] {
  if (c.sinks.length === 0) return c.useDefaultSink === false ? [] : [{ ref: DEFAULT_SINK, resolved: null }]
  return c.sinks.map((s) => ({ ref: { namespace: s.namespace, name: s.name }, resolved: s }))
}

/**
 * One inventory as the exporter holds it: its composition, one sink driver per sink it names
 * (a fresh one when a sink's spec changes), its debounce, the newest snapshot built for it, and
 * its finalize. Its fields change through its methods only.
 */
export class Inventory {
  private current: InventoryComposition
  private readonly sinks = new Map<string, { driver: SinkDriver; poolKey: string }>()
  private latest: Snapshot | null = null
  private finalizeRun: Promise<void> | null = null
  private done = false
  readonly debounce: Debounce

  constructor(composition: InventoryComposition, private readonly deps: InventoryDeps) {
    this.current = composition
    this.debounce = new Debounce(deps.ctx.clock, () => deps.due(this))
    this.reconcile()
  }

  get composition(): InventoryComposition {
    return this.current
  }

  get ref(): ObjectRef {
    return this.current.inventory
  }

  /** The drivers, in composition order. */
  get drivers(): SinkDriver[] {
    return [...this.sinks.values()].map((s) => s.driver)
  }

  driver(sinkKey: string): SinkDriver | undefined {
    return this.sinks.get(sinkKey)?.driver
  }

  /** The newest snapshot built from the targets' reports since start; null before the first. */
  get desired(): Snapshot | null {
    return this.latest
  }

  get finalizing(): Promise<void> | null {
    return this.finalizeRun
  }

  get finalized(): boolean {
    return this.done
  }

  /** Another composition: sinks follow it (a changed spec gets a fresh driver). */
  recompose(composition: InventoryComposition): void {
    this.current = composition
    this.reconcile()
  }

  /** Offer `snapshot` to every sink; each writes it unless it confirmed it already. */
  export(snapshot: Snapshot): void {
    this.latest = snapshot
    for (const d of this.drivers) d.offer(snapshot)
  }

  /** Run `finalize` once; a failure is reported through `onError` and the next call tries again. */
  beginFinalize(finalize: () => Promise<void>, onError: (err: Error) => void): Promise<void> {
    this.debounce.cancel()
    this.finalizeRun ??= finalize().then(
      () => { this.done = true },
      (err: Error) => {
        this.finalizeRun = null
        onError(err)
      },
    )
    return this.finalizeRun
  }

  /** Stop every driver, then carry out each sink's deletion policy; throws what failed. */
  async finalizeSinks(cluster: string): Promise<void> {
    // Stop writers first, so a retrying write cannot land after the delete.
    for (const d of this.drivers) d.stop()
    await Promise.allSettled(this.drivers.map((d) => d.settled))
    const failures: string[] = []
    await Promise.all(this.drivers.map((d) => d.finalize(cluster).catch((err: Error) => {
      failures.push(`${refKey(d.ref)}: ${err.message}`)
    })))
    if (failures.length > 0) throw new Error(failures.join('; '))
  }

  /** Forgotten: timers and writers stop, pooled sinks are released. */
  dispose(): void {
    this.debounce.cancel()
    for (const [key, s] of this.sinks) this.drop(key, s)
  }

  private reconcile(): void {
    const wanted = new Map(sinkRefs(this.current).map((s) => [refKey(s.ref), s]))
    for (const [key, s] of this.sinks) {
      const w = wanted.get(key)
      if (!w || poolKeyOf(w.resolved) !== s.poolKey) this.drop(key, s)
    }
    for (const [key, w] of wanted) {
      if (this.sinks.has(key)) continue
      const poolKey = poolKeyOf(w.resolved)
      this.deps.pool.acquire(poolKey, w.resolved)
      const driver = new SinkDriver(this.deps.ctx, {
        ref: w.ref,
        inventory: this.current.inventory,
        resolved: w.resolved,
        desired: () => this.latest,
        open: () => this.deps.pool.sinkFor(poolKey, w.resolved),
        events: this.deps.events(this),
        driftChecks: true,
      })
      this.sinks.set(key, { driver, poolKey })
    }
  }

  private drop(key: string, s: { driver: SinkDriver; poolKey: string }): void {
    s.driver.stop()
    this.deps.pool.release(s.poolKey)
    this.sinks.delete(key)
  }
}
