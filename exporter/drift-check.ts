import { refKey } from '../api/canonical.js'
import { FencedError } from '../sinks/fence.js'
import type { DriftResult, Sink, WriteResult } from '../sinks/sink.js'
import { checkFailedMessage, driftSettings } from './drift.js'
import { isPermanent, retryDelayMs } from './retry.js'
import { forSink, type Confirmed, type DriverContext, type DriverHandle, type DriverStrategy, type DriverSubject, type StrategyOutcome } from './strategy.js'
import { Timer } from './timer.js'

/** What status shows of a sink's drift checks. */
export interface DriftView {
  /** The last check failed (the record could not be read): why. */
  failing: string | null
  /** When the failed check runs again. */
  retryAt: number | null
  /** What the last check found and left (policy Report); null when in step. */
  drift: DriftResult | null
}

/**
 * Drift checks of a sink of record: the first after the first confirmed export since start (so
 * after every restart or takeover), then every interval, and right after an export that follows
 * found drift. Only a confirmed, current export is checked: a pending one is still being written.
 * A check that fails is retried with the writes' backoff, not an interval later, so a sink whose
 * record cannot be read is Unverified for seconds, not minutes.
 */
export class DriftCheck implements DriverStrategy {
  private owed = false
  private verified = false
  private attempts = 0
  private readonly timer: Timer
  private state: DriftView = { failing: null, retryAt: null, drift: null }

  constructor(private readonly ctx: DriverContext, private readonly subject: DriverSubject, private readonly driver: DriverHandle) {
    this.timer = new Timer(ctx.clock)
  }

  get due(): boolean {
    return this.owed
  }

  get view(): Readonly<DriftView> {
    return this.state
  }

  confirmed(_snapshot: unknown, _result: WriteResult): void {
    if (!this.verified || this.state.drift) this.owed = true
  }

  stop(): void {
    this.timer.clear()
  }

  async run(sinkOf: () => Promise<Sink>, confirmed: Confirmed | null): Promise<StrategyOutcome> {
    const { clock, observer, log } = this.ctx
    this.owed = false
    const settings = driftSettings(this.subject.resolved)
    const snapshot = this.subject.desired()
    if (!settings.mode || !snapshot || confirmed?.checksum !== snapshot.checksum) return { kind: 'done' }
    const event = { sink: this.subject.ref, inventory: this.subject.inventory }
    const fields = { sink: refKey(this.subject.ref), inventory: refKey(this.subject.inventory) }
    let result: DriftResult
    try {
      const sink = await sinkOf()
      if (!sink.verify) {
        // file has no verify: nothing to compare (see docs/design.md, drift checks)
        this.checked()
        return { kind: 'done' }
      }
      result = await sink.verify(forSink(snapshot, this.subject.resolved), settings.mode, this.ctx.fence)
    } catch (err) {
      if (this.driver.stopped) return { kind: 'done' }
      // A repair is a write: fenced, the check waits for a renewal like an export does.
      if (err instanceof FencedError) {
        this.owed = true
        return { kind: 'fenced', reason: err.message }
      }
      const attempt = ++this.attempts
      const waitMs = isPermanent(err) ? this.ctx.backoff.maxMs : retryDelayMs(this.ctx.backoff, attempt)
      this.state = { ...this.state, failing: checkFailedMessage(err as Error), retryAt: clock.now() + waitMs }
      log(attempt === 1 ? 'warn' : 'info', 'drift check failed; retrying with backoff', { ...fields, attempt, error: (err as Error).message })
      observer?.onDrift?.({ ...event, result: 'error', differences: 0 })
      this.schedule(waitMs)
      return { kind: 'done' }
    }
    this.checked()
    this.state = { ...this.state, drift: result.differences > 0 && !result.repaired ? result : null }
    if (result.repaired) {
      log('warn', 'repaired drift: the sink held changes made outside Kollect', { ...fields, differences: result.differences, examples: result.examples })
    } else if (this.state.drift) {
      log('warn', 'drift found: the sink holds changes made outside Kollect', { ...fields, differences: result.differences, examples: result.examples })
    }
    observer?.onDrift?.({ ...event, result: result.repaired ? 'repaired' : this.state.drift ? 'drifted' : 'in-step', differences: result.differences })
    if (!this.driver.stopped) this.schedule(settings.intervalMs)
    return { kind: result.repaired ? 'repaired' : 'done' }
  }

  /** A check ran to its end: whatever failed before no longer stands. */
  private checked(): void {
    this.verified = true
    this.attempts = 0
    this.state = { ...this.state, failing: null, retryAt: null }
  }

  private schedule(waitMs: number): void {
    this.timer.arm(waitMs, () => {
      this.owed = true
      this.driver.wake()
    })
  }
}
