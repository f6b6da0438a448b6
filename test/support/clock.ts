import type { Clock } from '../../exporter/index.js'

interface FakeTimer {
  id: number
  due: number
  fn: () => void
}

/** Node's setTimeout takes delays up to this many ms. */
export const MAX_NODE_TIMER_MS = 2 ** 31 - 1

/** 2025-01-01T00:00:00Z: a fixed start, so times derived from the clock are reproducible. */
export const FAKE_EPOCH = Date.UTC(2025, 0, 1)

/**
 * A deterministic Clock: time moves only through advance(), which fires every timer that falls
 * due, in due-time order (ties in the order they were set), with now() equal to the timer's due
 * time while it runs. Timers set by a firing timer run in the same advance() if they fall due.
 */
export class FakeClock implements Clock {
  private current: number
  private seq = 0
  private readonly timers = new Map<number, FakeTimer>()

  constructor(start: number = FAKE_EPOCH) {
    this.current = start
  }

  now(): number {
    return this.current
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq
    // As Node's timers: a delay past 2^31-1 ms is 1 ms (with a TimeoutOverflowWarning), not that long.
    const delay = ms > MAX_NODE_TIMER_MS ? 1 : Number.isFinite(ms) && ms > 0 ? ms : 0
    this.timers.set(id, { id, due: this.current + delay, fn })
    return id
  }

  clearTimeout(handle: unknown): void {
    if (typeof handle === 'number') this.timers.delete(handle)
  }

  /** Move time forward by ms, firing due timers in order. */
  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`cannot advance by ${ms} ms`)
    const target = this.current + ms
    for (;;) {
      const next = this.nextTimer(target)
      if (!next) break
      this.timers.delete(next.id)
      this.current = next.due
      next.fn()
    }
    this.current = target
  }

  /** Move time forward to an absolute instant (not backwards). */
  advanceTo(instant: number): void {
    this.advance(instant - this.current)
  }

  /** Number of armed timers. */
  pendingTimers(): number {
    return this.timers.size
  }

  /** Due time of the earliest armed timer, or null. */
  nextDue(): number | null {
    return this.nextTimer(Number.POSITIVE_INFINITY)?.due ?? null
  }

  private nextTimer(limit: number): FakeTimer | undefined {
    let next: FakeTimer | undefined
    for (const t of this.timers.values()) {
      if (t.due > limit) continue
      if (!next || t.due < next.due || (t.due === next.due && t.id < next.id)) next = t
    }
    return next
  }
}
