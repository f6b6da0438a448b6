import type { InventoryComposition } from '../api/types.js'
import type { Clock } from './options.js'
import { Timer } from './timer.js'

/**
 * When one inventory exports: `debounce` after the last change, at the latest `maxWait` after the
 * first one, and only once every target has reported (the completeness gate).
 */
export class Debounce {
  private readonly timer: Timer
  private firstPendingAt: number | null = null

  constructor(private readonly clock: Clock, private readonly fire: () => void) {
    this.timer = new Timer(clock)
  }

  /** When the armed timer fires; null when no change waits for the debounce. */
  get dueAt(): number | null {
    return this.timer.dueAt
  }

  /** A change: (re)arm the timer, unless the inventory is suspended or `blocked` (finalizing, or the exporter closed). */
  dirty(c: InventoryComposition, blocked: boolean): void {
    if (c.suspend) {
      // A suspended inventory exports nothing, including a change already waiting for its debounce.
      this.cancel()
      this.firstPendingAt = null
      return
    }
    if (blocked) return
    const now = this.clock.now()
    this.firstPendingAt ??= now
    const due = Math.min(now + c.debounceMs, this.firstPendingAt + c.maxWaitMs)
    this.timer.arm(Math.max(now, due) - now, this.fire)
  }

  cancel(): void {
    this.timer.clear()
  }

  /** Fire an armed timer now (graceful shutdown, tests). */
  flush(): void {
    if (!this.timer.armed) return
    this.cancel()
    this.fire()
  }

  /**
   * Whether a due export may run. With targets missing it waits: the next report of a missing
   * target marks the inventory dirty again.
   */
  gate(c: InventoryComposition, finalizing: boolean, missingTargets: number): boolean {
    if (c.suspend || finalizing) return false
    this.firstPendingAt = null
    return missingTargets === 0
  }
}
