import type { InventoryComposition, ObjectRef, ResolvedSink, Snapshot } from '../api/types.js'
import type { DriftResult } from '../sinks/sink.js'

/** What the exporter holds per sink of an inventory: the writer's state, read by state(). */
export interface SinkRuntime {
  ref: ObjectRef
  poolKey: string
  resolved: ResolvedSink | null
  pending: Snapshot | null
  /** restored: read from the journal at start, not confirmed since; the sink may hold something newer. */
  confirmed: { checksum: string; itemCount: number; at: number; restored?: boolean } | null
  failing: string | null
  /** When the failing sink's next attempt starts at the latest. */
  retryAt: number | null
  running: Promise<void> | null
  abort: AbortController
  /** A drift check is owed: after the first confirmed export since start, then every interval. */
  verifyDue: boolean
  verified: boolean
  verifyTimer: unknown
  /** The last drift check failed (the record could not be read): why, as status shows it. */
  verifyFailing: string | null
  /** Failed checks in a row: the backoff of the next one. */
  verifyAttempts: number
  /** When the failed check runs again. */
  verifyRetryAt: number | null
  /** After a permanent error: the next attempt at the maximum backoff, unless a change comes first. */
  holdTimer: unknown
  /** What the last check found and left (policy Report); null when in step. */
  drift: DriftResult | null
  /** The confirmed snapshot is proposed for review (git review mode), not in the store of record yet. */
  review: { url: string; checksum: string } | null
  /** The next write of the proposed snapshot, which learns whether the request was merged. */
  reviewTimer: unknown
  reviewAt: number | null
  /** The writer stopped with work owed for want of a recent lease renewal: a renewal drives it again. */
  fenced: boolean
}

/** What the exporter holds per inventory: its composition, sinks, schedule and journal state. */
export interface InventoryRuntime {
  composition: InventoryComposition
  sinks: Map<string, SinkRuntime>
  desired: Snapshot | null
  firstPendingAt: number | null
  lastChangeAt: number
  timer: unknown
  /** When the armed timer fires; null when no change waits for the debounce. */
  dueAt: number | null
  finalizing: Promise<void> | null
  finalized: boolean
  /** The journal holds an export of this inventory that some sink still owes. */
  journaled: boolean
  /**
   * A journaled export restored at start, never written as it is: it waits for the completeness
   * gate, and the snapshot the fresh reports build is what is written (see docs/design.md).
   */
  resumed: { checksum: string; itemCount: number; sinks: string[] } | null
}

export function newInventoryRuntime(composition: InventoryComposition): InventoryRuntime {
  return { composition, sinks: new Map(), desired: null, firstPendingAt: null, lastChangeAt: 0, timer: null, dueAt: null, finalizing: null, finalized: false, journaled: false, resumed: null }
}

export function newSinkRuntime(ref: ObjectRef, poolKey: string, resolved: ResolvedSink | null): SinkRuntime {
  return {
    ref, poolKey, resolved, pending: null, confirmed: null, failing: null, retryAt: null, running: null, abort: new AbortController(),
    verifyDue: false, verified: false, verifyTimer: null, verifyFailing: null, verifyAttempts: 0, verifyRetryAt: null, holdTimer: null, drift: null, review: null, reviewTimer: null, reviewAt: null, fenced: false,
  }
}
