import type { ObjectRef, Snapshot } from '../api/types.js'
import type { WriteFence } from './fence.js'

/** What one export changed in a sink; a retry of the same snapshot reports all zeros. */
export interface WriteResult {
  added: number
  changed: number
  removed: number
  /**
   * The snapshot is proposed for review and not in the store of record yet (git review mode):
   * the open request, and when to write the snapshot again to learn whether it was merged.
   */
  review?: { url: string; pollMs: number }
}

/**
 * Every sink has this shape. A sink computes the diff against what it itself holds (its own
 * persistent state, cached in memory), so a restarted exporter or a second replica writes
 * nothing new for a snapshot that is already there.
 */
export interface Sink {
  /** "namespace/name" of the KollectSink (or "embedded/default"). */
  readonly id: string
  /** `fence` (leader election) is checked again at the sink's commit point; absent, nothing is fenced. */
  write(snapshot: Snapshot, fence?: WriteFence): Promise<WriteResult>
  /**
   * Drift detection for a store of record: read what the store itself holds for the snapshot's
   * inventory (never a cache), compare it with the snapshot, and in 'repair' mode write the
   * snapshot back when they differ. Sinks that keep no record to drift (event streams) leave it out.
   */
  verify?(snapshot: Snapshot, mode: DriftMode, fence?: WriteFence): Promise<DriftResult>
  /** deletionPolicy Delete: remove everything this sink holds for the inventory. */
  remove(inventory: ObjectRef, cluster: string): Promise<void>
  healthcheck(): Promise<void>
  close(): Promise<void>
}

export type DriftMode = 'report' | 'repair'

/** What a drift check found in the store, compared with the snapshot the exporter last confirmed. */
export interface DriftResult {
  /** Items that differ: edited, added or removed outside Kollect (a changed header counts as one). 0 when in step. */
  differences: number
  /** Up to five keys of differing items (itemKey, or a file path), for the status message. */
  examples: string[]
  /** The sink wrote the snapshot back: mode 'repair' found differences and fixed them. */
  repaired: boolean
}

export type Credentials = Readonly<Record<string, string>>

/** A sink error says whether retrying can help; messages never carry credentials. */
export class SinkError extends Error {
  readonly retriable: boolean
  constructor(message: string, options: { retriable: boolean; cause?: unknown }) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'SinkError'
    this.retriable = options.retriable
  }
}

export function emptyResult(): WriteResult {
  return { added: 0, changed: 0, removed: 0 }
}
