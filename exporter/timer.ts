import type { Clock } from './options.js'

/**
 * One timer on the exporter's clock, owned by whoever arms it: armed at most once at a time, and
 * it knows when it is due (status shows that). Clock handles stay inside.
 */
export class Timer {
  private handle: unknown = null
  private due: number | null = null

  constructor(private readonly clock: Clock) {}

  /** Arm (again) to run `fn` in `ms`; an armed one is cleared first. */
  arm(ms: number, fn: () => void): void {
    this.clear()
    const now = this.clock.now()
    this.due = now + Math.max(0, ms)
    this.handle = this.clock.setTimeout(() => {
      this.handle = null
      this.due = null
      fn()
    }, Math.max(0, ms))
  }

  clear(): void {
    if (this.handle !== null) this.clock.clearTimeout(this.handle)
    this.handle = null
    this.due = null
  }

  get armed(): boolean {
    return this.handle !== null
  }

  /** When it fires; null when not armed. */
  get dueAt(): number | null {
    return this.due
  }
}
