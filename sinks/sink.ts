import type { Item, ObjectRef, Snapshot } from '../api/types.js'

/** What one export changed in a sink; a retry of the same snapshot reports all zeros. */
export interface WriteResult {
  added: number
  changed: number
  removed: number
}

/**
 * Every sink has this shape. A sink computes the diff against what it itself holds (its own
 * persistent state, cached in memory), so a restarted exporter or a second replica writes
 * nothing new for a snapshot that is already there.
 */
export interface Sink {
  /** "namespace/name" of the KollectSink (or "embedded/default"). */
  readonly id: string
  write(snapshot: Snapshot): Promise<WriteResult>
  /** deletionPolicy Delete: remove everything this sink holds for the inventory. */
  remove(inventory: ObjectRef, cluster: string): Promise<void>
  healthcheck(): Promise<void>
  close(): Promise<void>
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

export type { Item }
