import { FencedError, type FencingToken, type WriteFence } from '../sinks/fence.js'

/**
 * Fencing by the Lease: under leader election a writer starts a sink call only while it can prove
 * a renewal within the renew deadline, and the sink asks again at its commit point. The elector's
 * loss of the Lease reaches the exporter only after a renew round trip; a process resumed from a
 * pause (GC, SIGSTOP, a frozen node) runs its due timers first, and without this check would write
 * while another holder already does. Measured on the monotonic clock, from when the renewing round
 * began. The token goes with every write, for the stores that can refuse an older leader.
 */
export class LeaseFence implements WriteFence {
  private renewedAt = Number.NEGATIVE_INFINITY
  private held: FencingToken | undefined

  constructor(private readonly deadlineMs: number | undefined, private readonly now: () => number) {}

  renewed(at: number, token?: FencingToken): void {
    this.renewedAt = Math.max(this.renewedAt, at)
    if (token) this.held = token
  }

  get token(): FencingToken | undefined {
    return this.deadlineMs === undefined ? undefined : this.held
  }

  /** True without leader election. */
  holds(): boolean {
    return this.deadlineMs === undefined || this.now() - this.renewedAt < this.deadlineMs
  }

  check(point: string): void {
    if (!this.holds()) throw new FencedError(`the lease was not renewed within the renew deadline; not ${point}`)
  }
}
