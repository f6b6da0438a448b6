import type { Snapshot } from '../api/types.js'
import type { WriteResult } from '../sinks/sink.js'
import type { Confirmed, DriverStrategy, StrategyOutcome } from './strategy.js'
import type { Clock } from './options.js'
import { Timer } from './timer.js'

/** What status shows of a proposal: its request, the proposed checksum, and when it is polled next. */
export interface ReviewView {
  url: string
  checksum: string
  pollAt: number | null
}

/**
 * Git review mode: a snapshot proposed for review is written again after the sink's poll
 * interval, and that write learns whether the request was merged (or merges it). A newer change
 * ends the wait, as it replaces the proposal anyway.
 */
export class ReviewPoll implements DriverStrategy {
  private proposal: { url: string; checksum: string } | null = null
  private readonly timer: Timer

  /** `rewrite(checksum)`: write the proposed snapshot again, if it is still the newest. */
  constructor(clock: Clock, private readonly rewrite: (checksum: string) => void) {
    this.timer = new Timer(clock)
  }

  readonly due = false

  get view(): ReviewView | null {
    return this.proposal && { ...this.proposal, pollAt: this.timer.dueAt }
  }

  /** A write of the snapshot already proposed that found the request still open: no new export. */
  isPoll(snapshot: Snapshot, result: WriteResult, confirmed: Confirmed | null): boolean {
    return result.review !== undefined && this.proposal?.checksum === snapshot.checksum && confirmed?.checksum === snapshot.checksum
  }

  confirmed(snapshot: Snapshot, result: WriteResult): void {
    this.stop()
    const review = result.review
    if (!review) return
    this.proposal = { url: review.url, checksum: snapshot.checksum }
    this.timer.arm(review.pollMs, () => this.rewrite(snapshot.checksum))
  }

  async run(): Promise<StrategyOutcome> {
    return { kind: 'done' }
  }

  stop(): void {
    this.timer.clear()
    this.proposal = null
  }
}
