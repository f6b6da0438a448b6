import { refKey } from '../api/canonical.js'
import { formatDuration } from '../api/duration.js'
import type { ResolvedSink, Snapshot } from '../api/types.js'
import { FencedError, type WriteFence } from '../sinks/fence.js'
import type { DriftResult, WriteResult } from '../sinks/sink.js'
import { checkFailedMessage, driftSettings } from './drift.js'
import type { Clock, ExporterObserver, Log } from './options.js'
import type { SinkPool } from './pool.js'
import { isPermanent, maxRetryDelayMs, retryDelayMs, retryUntilDone, type BackoffPolicy } from './retry.js'
import type { InventoryRuntime, SinkRuntime } from './runtime.js'

export interface WriterContext {
  clock: Clock
  backoff: BackoffPolicy
  pool: SinkPool
  observer: ExporterObserver | undefined
  log: Log
  /** The first failed attempt of an export: from here on a crash must not lose it. */
  onFailing(inv: InventoryRuntime): void
  /** A sink confirmed an export. */
  onConfirmed(inv: InventoryRuntime): void
  /** A writer loop ended: the number of owed exports may have changed. */
  onStopped(): void
  /** Whether this exporter may start a sink call now (leader election: a recent lease renewal). */
  mayWrite(): boolean
  /** Handed to every sink write, which checks it again at its commit point. */
  fence: WriteFence
}

/**
 * One writer per sink runtime: it always writes the newest pending snapshot, retrying with
 * backoff, holds after a permanent error, and runs the sink's drift checks between writes, so a
 * check never sees half an export.
 */
export class SinkWriter {
  constructor(private readonly ctx: WriterContext) {}

  drive(inv: InventoryRuntime, rt: SinkRuntime): void {
    if (rt.running) return
    rt.fenced = false
    const { clock, backoff, observer, log } = this.ctx
    clock.clearTimeout(rt.holdTimer)
    rt.holdTimer = null
    const run = async () => {
      while (!rt.abort.signal.aborted) {
        // Drift repairs write too. What is owed stays owed until a renewal drives the writer again.
        if (!this.ctx.mayWrite()) return this.fence(inv, rt)
        if (!rt.pending) {
          if (!rt.verifyDue) return
          await this.verify(inv, rt)
          if (rt.fenced) return
          continue
        }
        const snapshot = rt.pending
        const started = clock.now()
        // A sink that found a later leader's token in its store, or the lease expired at its commit point.
        let refusal: string | undefined
        const fenced = (err: FencedError): null => {
          refusal = err.message
          return null
        }
        try {
          const written = await retryUntilDone(async () => {
            const latest = rt.pending ?? snapshot
            const sink = await this.ctx.pool.sinkFor(rt.poolKey, rt.resolved)
            // Asked again at the last moment: a backoff, building the sink or a paused process may
            // have outlasted the renewal the loop saw.
            if (!this.ctx.mayWrite()) return null
            const result = await sink.write(forSink(latest, rt.resolved), this.ctx.fence).catch((err: unknown) => {
              if (err instanceof FencedError) return fenced(err)
              throw err
            })
            return result && { latest, result }
          }, {
            policy: backoff,
            signal: rt.abort.signal,
            onFailedAttempt: (error, attempt) => {
              rt.failing = error.message
              rt.retryAt = clock.now() + maxRetryDelayMs(backoff, attempt)
              // A crash from here on must not lose the export: a restart resumes it from the journal.
              if (attempt === 1) this.ctx.onFailing(inv)
              observer?.onExport?.({ sink: rt.ref, inventory: inv.composition.inventory, result: 'failure', durationMs: clock.now() - started, error })
              if (isPermanent(error)) log('warn', 'sink write failed with a permanent error; waiting for a change or the maximum backoff', { sink: refKey(rt.ref), inventory: refKey(inv.composition.inventory), attempt, error: error.message })
              else log(attempt === 1 ? 'warn' : 'info', 'sink write failed; retrying', { sink: refKey(rt.ref), inventory: refKey(inv.composition.inventory), attempt, error: error.message })
            },
          })
          if (!written) return this.fence(inv, rt, refusal)
          // A poll that finds the proposal still open is no new export: status stays byte-identical.
          const polled = written.result.review && rt.review?.checksum === written.latest.checksum && rt.confirmed?.checksum === written.latest.checksum
          if (!polled) rt.confirmed = { checksum: written.latest.checksum, itemCount: written.latest.itemCount, at: clock.now() }
          this.awaitReview(inv, rt, written.latest, written.result.review)
          rt.failing = null
          rt.retryAt = null
          if (rt.pending === written.latest) rt.pending = null
          // The first export since start, or one after drift was found: check the record now.
          if (!rt.verified || rt.drift) rt.verifyDue = true
          observer?.onExport?.({ sink: rt.ref, inventory: inv.composition.inventory, result: 'success', durationMs: clock.now() - started, written: written.result })
          this.ctx.onConfirmed(inv)
        } catch (err) {
          if (rt.abort.signal.aborted) return
          if (isPermanent(err)) {
            this.hold(inv, rt, err)
            return
          }
          log('error', 'sink writer stopped', { sink: refKey(rt.ref), error: (err as Error).message })
          return
        }
      }
    }
    rt.running = run().finally(() => {
      rt.running = null
      this.ctx.onStopped()
      // Work that arrived while the loop was ending would otherwise wait for the next event.
      if ((rt.pending || rt.verifyDue) && !rt.abort.signal.aborted && !rt.failing && !rt.fenced) this.drive(inv, rt)
    })
  }

  /** Abort the writer and its timers; what it is running settles on its own (rt.running). */
  stop(rt: SinkRuntime): void {
    rt.abort.abort()
    this.ctx.clock.clearTimeout(rt.verifyTimer)
    rt.verifyTimer = null
    this.ctx.clock.clearTimeout(rt.holdTimer)
    rt.holdTimer = null
    this.cancelReviewPoll(rt)
  }

  private fence(inv: InventoryRuntime, rt: SinkRuntime, reason = 'the lease was not renewed within the renew deadline'): void {
    rt.fenced = true
    this.ctx.log('warn', 'a sink write waits for a lease renewal', { sink: refKey(rt.ref), inventory: refKey(inv.composition.inventory), reason })
  }

  private cancelReviewPoll(rt: SinkRuntime): void {
    this.ctx.clock.clearTimeout(rt.reviewTimer)
    rt.reviewTimer = null
    rt.reviewAt = null
    rt.review = null
  }

  /**
   * A snapshot proposed for review is written again after the sink's poll interval: that write
   * learns whether the request was merged (or merges it). A newer change ends the wait, as it
   * replaces the proposal anyway.
   */
  private awaitReview(inv: InventoryRuntime, rt: SinkRuntime, snapshot: Snapshot, review: WriteResult['review']): void {
    const { clock } = this.ctx
    this.cancelReviewPoll(rt)
    if (!review) return
    rt.review = { url: review.url, checksum: snapshot.checksum }
    rt.reviewAt = clock.now() + review.pollMs
    rt.reviewTimer = clock.setTimeout(() => {
      rt.reviewTimer = null
      rt.reviewAt = null
      if (rt.abort.signal.aborted) return
      if (!rt.pending && inv.desired?.checksum === rt.review?.checksum) rt.pending = inv.desired
      this.drive(inv, rt)
    }, review.pollMs)
  }

  /**
   * Compare what the sink holds with the export it confirmed, and repair or report by its drift
   * policy. Only a confirmed, current export is checked: a pending one is still being written. A
   * check that fails is retried with the writes' backoff, not an interval later, so a sink whose
   * record cannot be read is Unverified for seconds, not minutes.
   */
  private async verify(inv: InventoryRuntime, rt: SinkRuntime): Promise<void> {
    const { clock, observer, log } = this.ctx
    rt.verifyDue = false
    const settings = driftSettings(rt.resolved)
    const snapshot = inv.desired
    if (!settings.mode || !snapshot || rt.confirmed?.checksum !== snapshot.checksum) return
    const event = { sink: rt.ref, inventory: inv.composition.inventory }
    const fields = { sink: refKey(rt.ref), inventory: refKey(inv.composition.inventory) }
    let result: DriftResult
    try {
      const sink = await this.ctx.pool.sinkFor(rt.poolKey, rt.resolved)
      if (!sink.verify) {
        rt.verified = true // file has no verify: nothing to compare (see docs/design.md, drift checks)
        this.checked(rt)
        return
      }
      result = await sink.verify(forSink(snapshot, rt.resolved), settings.mode, this.ctx.fence)
    } catch (err) {
      if (rt.abort.signal.aborted) return
      // A repair is a write: fenced, the check waits for a renewal like an export does.
      if (err instanceof FencedError) {
        rt.verifyDue = true
        return this.fence(inv, rt, err.message)
      }
      const attempt = ++rt.verifyAttempts
      const waitMs = isPermanent(err) ? this.ctx.backoff.maxMs : retryDelayMs(this.ctx.backoff, attempt)
      rt.verifyFailing = checkFailedMessage(err as Error)
      rt.verifyRetryAt = clock.now() + waitMs
      log(attempt === 1 ? 'warn' : 'info', 'drift check failed; retrying with backoff', { ...fields, attempt, error: (err as Error).message })
      observer?.onDrift?.({ ...event, result: 'error', differences: 0 })
      this.scheduleCheck(inv, rt, waitMs)
      return
    }
    rt.verified = true
    this.checked(rt)
    rt.drift = result.differences > 0 && !result.repaired ? result : null
    if (result.repaired) {
      rt.confirmed = { ...rt.confirmed, at: clock.now() }
      log('warn', 'repaired drift: the sink held changes made outside Kollect', { ...fields, differences: result.differences, examples: result.examples })
    } else if (rt.drift) {
      log('warn', 'drift found: the sink holds changes made outside Kollect', { ...fields, differences: result.differences, examples: result.examples })
    }
    observer?.onDrift?.({ ...event, result: result.repaired ? 'repaired' : rt.drift ? 'drifted' : 'in-step', differences: result.differences })
    if (!rt.abort.signal.aborted) this.scheduleCheck(inv, rt, settings.intervalMs)
  }

  /** A check ran to its end: whatever failed before no longer stands. */
  private checked(rt: SinkRuntime): void {
    rt.verifyFailing = null
    rt.verifyAttempts = 0
    rt.verifyRetryAt = null
  }

  private scheduleCheck(inv: InventoryRuntime, rt: SinkRuntime, waitMs: number): void {
    const { clock } = this.ctx
    clock.clearTimeout(rt.verifyTimer)
    rt.verifyTimer = clock.setTimeout(() => {
      rt.verifyTimer = null
      rt.verifyDue = true
      this.drive(inv, rt)
    }, waitMs)
  }

  /**
   * A permanent error: retrying at once cannot help, so the writer waits at the maximum backoff.
   * A change of the inventory's items or of the sink's spec drives it again at once.
   */
  private hold(inv: InventoryRuntime, rt: SinkRuntime, err: Error): void {
    const waitMs = this.ctx.backoff.maxMs
    rt.failing = `${err.message} (permanent: tried again in ${formatDuration(waitMs)}, or at once when the sink or the inventory changes)`
    rt.retryAt = this.ctx.clock.now() + waitMs
    rt.holdTimer = this.ctx.clock.setTimeout(() => {
      rt.holdTimer = null
      if (!rt.abort.signal.aborted) this.drive(inv, rt)
    }, waitMs)
  }
}

/** The snapshot as a sink writes it: labelled with the sink's cluster when it names one. */
function forSink(snapshot: Snapshot, resolved: ResolvedSink | null): Snapshot {
  const cluster = resolved?.spec.cluster
  return cluster && cluster !== snapshot.cluster ? { ...snapshot, cluster } : snapshot
}
