import { setTimeout as sleep } from 'node:timers/promises'
import { refKey } from '../api/canonical.js'
import { formatDuration } from '../api/duration.js'
import type { ObjectRef, ResolvedSink, Snapshot } from '../api/types.js'
import { FencedError } from '../sinks/fence.js'
import type { Sink } from '../sinks/sink.js'
import { DriftCheck } from './drift-check.js'
import { isPermanent, maxRetryDelayMs, retryUntilDone } from './retry.js'
import { ReviewPoll } from './review-poll.js'
import { forSink, type Confirmed, type DriverContext, type DriverHandle, type DriverStrategy, type DriverSubject } from './strategy.js'
import { Timer } from './timer.js'

/** What the driver's owner hears of it (the exporter keeps its journal by these). */
export interface DriverEvents {
  /** The first failed attempt of an export: from here on a crash must not lose it. */
  failing?(): void
  /** The sink confirmed an export. */
  confirmed?(): void
  /** The write loop ended: whether an export is owed may have changed. */
  stopped?(): void
}

export interface DriverOptions extends DriverSubject {
  /** The sink to write, built (or found in a pool) when the loop needs it. */
  open(): Promise<Sink>
  events?: DriverEvents
  /** Run drift checks by the sink's policy (the exporter); the hub's sinks run none. */
  driftChecks: boolean
}

/**
 * Drives one sink of one inventory, and owns everything about it: the snapshot it owes, what the
 * sink last confirmed, the failure status shows, the retry and hold timers, and its strategies
 * (drift checks, review polls). It always writes the newest snapshot offered, retrying with
 * backoff, holds after a permanent error, and runs its strategies' work between writes. The
 * exporter and the hub call its methods; nothing else changes its state.
 */
export class SinkDriver {
  private pending: Snapshot | null = null
  private confirmedExport: Confirmed | null = null
  private failing: string | null = null
  private retryAt: number | null = null
  private running: Promise<void> | null = null
  private abort = new AbortController()
  /** Stopped with work owed for want of a recent lease renewal: a renewal drives it again. */
  private fenced = false
  private readonly hold: Timer
  private readonly waiters: { resolve(): void; reject(err: Error): void }[] = []
  readonly drift: DriftCheck | null
  readonly review: ReviewPoll
  private readonly strategies: DriverStrategy[]

  constructor(private readonly ctx: DriverContext, private readonly options: DriverOptions) {
    this.hold = new Timer(ctx.clock)
    const stopped = (): boolean => this.abort.signal.aborted
    const handle: DriverHandle = { wake: () => this.wake(), get stopped() { return stopped() } }
    this.drift = options.driftChecks ? new DriftCheck(ctx, options, handle) : null
    this.review = new ReviewPoll(ctx.clock, (checksum) => this.repropose(checksum))
    this.strategies = this.drift ? [this.drift, this.review] : [this.review]
  }

  get ref(): ObjectRef {
    return this.options.ref
  }

  get resolved(): ResolvedSink | null {
    return this.options.resolved
  }

  /** An export is owed: offered, not confirmed yet. */
  get owes(): boolean {
    return this.pending !== null
  }

  get confirmed(): Readonly<Confirmed> | null {
    return this.confirmedExport
  }

  /** Why the last attempt failed, and when the next starts at the latest; null while writes succeed. */
  get failure(): { message: string; retryAt: number | null } | null {
    return this.failing === null ? null : { message: this.failing, retryAt: this.retryAt }
  }

  /** Settles when the write loop (and what it is running) ends. */
  get settled(): Promise<void> {
    return this.running ?? Promise.resolve()
  }

  get busy(): boolean {
    return this.running !== null
  }

  /** Write `snapshot`, unless the sink confirmed it already (a confirmation from the journal spares nothing). */
  offer(snapshot: Snapshot): void {
    const c = this.confirmedExport
    if (c?.checksum === snapshot.checksum && !c.restored && !this.pending) return
    this.pending = snapshot
    this.drive()
  }

  /** Resolves once nothing is owed: every offer so far confirmed (or superseded by one that is); rejects when stopped. */
  written(): Promise<void> {
    if (!this.pending) return Promise.resolve()
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }))
  }

  /** A lease renewal: a writer that waited for one goes on. */
  renewed(): void {
    if (this.fenced) this.drive()
  }

  /** What the journal says the sink confirmed before a restart: status shows it, and it spares no write. */
  restore(confirmed: Omit<Confirmed, 'restored'>): void {
    this.confirmedExport ??= { ...confirmed, restored: true }
  }

  /** Stop the loop and its timers; what it is running settles on its own (`settled`). */
  stop(): void {
    this.abort.abort()
    this.hold.clear()
    for (const s of this.strategies) s.stop()
    for (const w of this.waiters.splice(0)) w.reject(new Error('the sink driver stopped'))
  }

  /** Leadership lost: stop, and drop what was owed; the next holder computes it again. */
  standBy(): void {
    this.stop()
    this.pending = null
  }

  /** Leadership gained: what the last holder confirmed is unknown here, so nothing is taken as confirmed. */
  activate(): void {
    if (this.abort.signal.aborted) this.abort = new AbortController()
    this.confirmedExport = null
  }

  /**
   * Finalize, once stopped and settled: carry out the sink's deletion policy. Throws what failed,
   * which status shows until the next finalize. The driver can be driven again afterwards.
   */
  async finalize(cluster: string): Promise<void> {
    this.pending = null
    try {
      if ((this.options.resolved?.spec.deletionPolicy ?? 'Retain') !== 'Delete') return
      try {
        const sink = await this.options.open()
        await sink.remove(this.options.inventory, this.options.resolved?.spec.cluster || cluster)
        this.failing = null
      } catch (err) {
        this.failing = (err as Error).message
        throw err
      }
    } finally {
      this.abort = new AbortController()
    }
  }

  /**
   * finalize, retried with the driver's backoff until it succeeds; after a permanent error the
   * next round waits the maximum backoff. For an owner that nobody retries for: the hub hears of a
   * spoke's removal once, while the exporter's finalize hook is retried by Metacontroller.
   * Rejects only when the signal aborts.
   */
  async finalizeUntilDone(cluster: string, signal: AbortSignal): Promise<void> {
    const { backoff, log } = this.ctx
    const fields = { sink: refKey(this.options.ref), inventory: refKey(this.options.inventory) }
    for (;;) {
      try {
        await retryUntilDone(() => this.finalize(cluster), {
          policy: backoff, signal,
          // A permanent error is not retried here: the catch below logs it.
          onFailedAttempt: (err, attempt) => {
            if (!isPermanent(err)) log(attempt === 1 ? 'warn' : 'info', 'sink removal failed; retrying', { ...fields, attempt, error: err.message })
          },
        })
        return
      } catch (err) {
        if (signal.aborted) throw err
        log('error', 'sink removal failed with a permanent error; trying again after the maximum backoff', { ...fields, error: (err as Error).message })
        await sleep(backoff.maxMs, undefined, { signal })
      }
    }
  }

  private wake(): void {
    if (!this.abort.signal.aborted) this.drive()
  }

  /** The review poll: write the proposed snapshot again while it is still the newest. */
  private repropose(checksum: string): void {
    if (this.abort.signal.aborted) return
    const desired = this.options.desired()
    if (!this.pending && desired?.checksum === checksum) this.pending = desired
    this.drive()
  }

  private drive(): void {
    if (this.running) return
    this.fenced = false
    this.hold.clear()
    this.running = this.loop().finally(() => {
      this.running = null
      this.options.events?.stopped?.()
      // Work that arrived while the loop was ending would otherwise wait for the next event.
      if ((this.pending || this.strategies.some((s) => s.due)) && !this.abort.signal.aborted && !this.failing && !this.fenced) this.drive()
    })
  }

  private async loop(): Promise<void> {
    const signal = this.abort.signal
    while (!signal.aborted) {
      // Drift repairs write too. What is owed stays owed until a renewal drives the writer again.
      if (!this.ctx.mayWrite()) return this.fence()
      if (!this.pending) {
        const owed = this.strategies.find((s) => s.due)
        if (!owed) return
        const outcome = await owed.run(() => this.options.open(), this.confirmedExport)
        if (outcome.kind === 'fenced') return this.fence(outcome.reason)
        if (outcome.kind === 'repaired' && this.confirmedExport) this.confirmedExport = { ...this.confirmedExport, at: this.ctx.clock.now() }
        continue
      }
      try {
        if (!(await this.writePending(signal))) return
      } catch (err) {
        if (signal.aborted) return
        if (isPermanent(err)) return this.holdAfter(err as Error)
        this.ctx.log('error', 'sink writer stopped', { sink: refKey(this.ref), error: (err as Error).message })
        return
      }
    }
  }

  /** One export, with its retries: false when it stopped for want of a lease renewal. */
  private async writePending(signal: AbortSignal): Promise<boolean> {
    const { clock, backoff, observer, log } = this.ctx
    const event = { sink: this.ref, inventory: this.options.inventory }
    const fields = { sink: refKey(this.ref), inventory: refKey(this.options.inventory) }
    const snapshot = this.pending as Snapshot
    const started = clock.now()
    // A sink that found a later leader's token in its store, or the lease expired at its commit point.
    let refusal: string | undefined
    const written = await retryUntilDone(async () => {
      const latest = this.pending ?? snapshot
      const sink = await this.options.open()
      // Asked again at the last moment: a backoff, building the sink or a paused process may
      // have outlasted the renewal the loop saw.
      if (!this.ctx.mayWrite()) return null
      try {
        return { latest, result: await sink.write(forSink(latest, this.options.resolved), this.ctx.fence) }
      } catch (err) {
        if (!(err instanceof FencedError)) throw err
        refusal = err.message
        return null
      }
    }, {
      policy: backoff,
      signal,
      onFailedAttempt: (error, attempt) => {
        this.failing = error.message
        this.retryAt = clock.now() + maxRetryDelayMs(backoff, attempt)
        // A crash from here on must not lose the export: a restart resumes it from the journal.
        if (attempt === 1) this.options.events?.failing?.()
        observer?.onExport?.({ ...event, result: 'failure', durationMs: clock.now() - started, error })
        const detail = { ...fields, attempt, error: error.message }
        if (isPermanent(error)) log('warn', 'sink write failed with a permanent error; waiting for a change or the maximum backoff', detail)
        else log(attempt === 1 ? 'warn' : 'info', 'sink write failed; retrying', detail)
      },
    })
    if (!written) {
      this.fence(refusal)
      return false
    }
    const { latest, result } = written
    if (!this.review.isPoll(latest, result, this.confirmedExport)) {
      this.confirmedExport = { checksum: latest.checksum, itemCount: latest.itemCount, at: clock.now() }
    }
    for (const s of this.strategies) s.confirmed(latest, result)
    this.failing = null
    this.retryAt = null
    if (this.pending === latest) this.pending = null
    observer?.onExport?.({ ...event, result: 'success', durationMs: clock.now() - started, written: result })
    // Hook calls log at debug: a write that changed the store is what an operator reads at info.
    const { added, changed, removed } = result
    if (added + changed + removed > 0) log('info', 'exported', { ...fields, added, changed, removed, itemCount: latest.itemCount })
    this.settleWaiters()
    this.options.events?.confirmed?.()
    return true
  }

  /** Nothing owed: every offer so far is confirmed, or superseded by one that is (a driver writes the newest). */
  private settleWaiters(): void {
    if (this.pending) return
    for (const w of this.waiters.splice(0)) w.resolve()
  }

  private fence(reason = 'the lease was not renewed within the renew deadline'): void {
    this.fenced = true
    this.ctx.log('warn', 'a sink write waits for a lease renewal', { sink: refKey(this.ref), inventory: refKey(this.options.inventory), reason })
  }

  /**
   * A permanent error: retrying at once cannot help, so the writer waits at the maximum backoff.
   * A change of the inventory's items or of the sink's spec drives it again at once.
   */
  private holdAfter(err: Error): void {
    const waitMs = this.ctx.backoff.maxMs
    this.failing = `${err.message} (permanent: tried again in ${formatDuration(waitMs)}, or at once when the sink or the inventory changes)`
    this.retryAt = this.ctx.clock.now() + waitMs
    this.hold.arm(waitMs, () => this.wake())
  }
}
