import type { ObjectRef, ResolvedSink, Snapshot } from '../api/types.js'
import type { WriteFence } from '../sinks/fence.js'
import type { Sink, WriteResult } from '../sinks/sink.js'
import type { BackoffPolicy } from './retry.js'
import type { Clock, ExporterObserver, Log } from './options.js'

/** What a sink driver and its strategies share: one per exporter (or hub). */
export interface DriverContext {
  clock: Clock
  backoff: BackoffPolicy
  log: Log
  observer: Pick<ExporterObserver, 'onExport' | 'onDrift'> | undefined
  /** Whether a write may start now (leader election: a recent lease renewal). */
  mayWrite(): boolean
  /** Handed to every sink call that can change the store; the sink checks it at its commit point. */
  fence: WriteFence
}

/** Who a driver writes for, as logs and events name it. */
export interface DriverSubject {
  /** The sink's KollectSink (or the embedded default). */
  ref: ObjectRef
  inventory: ObjectRef
  resolved: ResolvedSink | null
  /** The inventory's newest snapshot: what a check compares with, and what a review poll writes again. */
  desired(): Snapshot | null
}

export interface Confirmed {
  checksum: string
  itemCount: number
  at: number
  /** Read from the journal at start, not confirmed since: the sink may hold something newer. */
  restored?: boolean
}

/** What a strategy may ask of its driver. */
export interface DriverHandle {
  /** Run owed work now (a timer fired). */
  wake(): void
  /** Stopped: work that ends now must not arm anything. */
  readonly stopped: boolean
}

/** What a strategy's work between writes came to. */
export type StrategyOutcome =
  | { kind: 'done' }
  /** The store was written back: the confirmation is fresh. */
  | { kind: 'repaired' }
  /** It had to stop for want of a lease renewal; `reason` says which check refused. */
  | { kind: 'fenced'; reason: string }

/**
 * Work a sink driver runs around its writes (drift checks, review polls): told of every
 * confirmed export, it may owe work, which the driver runs between writes, so it never sees half
 * an export. Its timers wake the driver.
 */
export interface DriverStrategy {
  /** The driver confirmed `snapshot`; the sink answered `result`. */
  confirmed(snapshot: Snapshot, result: WriteResult): void
  /** Work is owed now. */
  readonly due: boolean
  /** `sink` builds (or finds) the sink: a failure to is the strategy's to handle. */
  run(sink: () => Promise<Sink>, confirmed: Confirmed | null): Promise<StrategyOutcome>
  /** The driver stopped: timers go. */
  stop(): void
}

/** The snapshot as a sink writes it: labelled with the sink's cluster when it names one. */
export function forSink(snapshot: Snapshot, resolved: ResolvedSink | null): Snapshot {
  const cluster = resolved?.spec.cluster
  return cluster && cluster !== snapshot.cluster ? { ...snapshot, cluster } : snapshot
}
