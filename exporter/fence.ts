/**
 * Fencing by the Lease: under leader election a writer starts a sink call only while it can prove
 * a renewal within the renew deadline. The elector's loss of the Lease reaches the exporter only
 * after a renew round trip; a process resumed from a pause (GC, SIGSTOP, a frozen node) runs its
 * due timers first, and without this check would write while another holder already does.
 * Measured on the monotonic clock, from when the renewing round began.
 */
export class LeaseFence {
  private renewedAt = Number.NEGATIVE_INFINITY

  constructor(private readonly deadlineMs: number | undefined, private readonly now: () => number) {}

  renewed(at: number): void {
    this.renewedAt = Math.max(this.renewedAt, at)
  }

  /** True without leader election. */
  holds(): boolean {
    return this.deadlineMs === undefined || this.now() - this.renewedAt < this.deadlineMs
  }
}
