import type { Clock } from './options.js'
import type { InventoryRuntime } from './runtime.js'

/**
 * When an inventory exports: `debounce` after the last change, at the latest `maxWait` after the
 * first one, and only once every target has reported (the completeness gate).
 */
export class Schedule {
  constructor(private readonly clock: Clock, private readonly fire: (inv: InventoryRuntime) => void) {}

  /** A change: (re)arm the timer, unless the inventory is suspended, finalizing, or the exporter closed. */
  dirty(inv: InventoryRuntime, closed: boolean): void {
    if (inv.composition.suspend) {
      // A suspended inventory exports nothing, including a change already waiting for its debounce.
      this.cancel(inv)
      inv.firstPendingAt = null
      return
    }
    if (closed || inv.finalizing) return
    const now = this.clock.now()
    inv.lastChangeAt = now
    inv.firstPendingAt ??= now
    const due = Math.min(now + inv.composition.debounceMs, inv.firstPendingAt + inv.composition.maxWaitMs)
    this.clock.clearTimeout(inv.timer)
    inv.dueAt = Math.max(now, due)
    inv.timer = this.clock.setTimeout(() => {
      inv.timer = null
      inv.dueAt = null
      this.fire(inv)
    }, inv.dueAt - now)
  }

  cancel(inv: InventoryRuntime): void {
    this.clock.clearTimeout(inv.timer)
    inv.timer = null
    inv.dueAt = null
  }

  /** Fire an armed timer now (graceful shutdown, tests). */
  flush(inv: InventoryRuntime): void {
    if (inv.timer === null) return
    this.cancel(inv)
    this.fire(inv)
  }

  /**
   * Whether a due export may run. With targets missing it waits: the next report of a missing
   * target marks the inventory dirty again.
   */
  gate(inv: InventoryRuntime, missingTargets: number): boolean {
    if (inv.composition.suspend || inv.finalizing) return false
    inv.firstPendingAt = null
    return missingTargets === 0
  }
}
