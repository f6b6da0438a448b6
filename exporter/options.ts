import type { ObjectRef, ResolvedSink } from '../api/types.js'
import type { Sink, WriteResult } from '../sinks/sink.js'
import type { BudgetLimit, BudgetOptions } from './budget.js'
import type { PendingJournal } from './pending-journal.js'
import type { BackoffPolicy } from './retry.js'

export interface Clock {
  now(): number
  /** Milliseconds on a clock no wall-clock step moves (performance.now); now() when left out. */
  monotonic?(): number
  setTimeout(fn: () => void, ms: number): unknown
  clearTimeout(handle: unknown): void
}

export const realClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
}

/** Node's timers wait at most this long; a longer delay fires after 1 ms instead. */
const MAX_TIMER_MS = 2 ** 31 - 1

/** A wait longer than one timer: a chain of timers, each re-armed for what is left. */
class LongWait {
  handle: unknown = null
}

/**
 * The clock with timers of any length: a delay past MAX_TIMER_MS (a debounce, drift or poll
 * interval that got past validation) is waited in steps, never turned into 1 ms.
 */
export function boundedClock(clock: Clock): Clock {
  return {
    now: () => clock.now(),
    monotonic: () => clock.monotonic?.() ?? clock.now(),
    setTimeout: (fn, ms) => {
      if (!(ms > MAX_TIMER_MS)) return clock.setTimeout(fn, ms)
      const wait = new LongWait()
      const due = clock.now() + ms
      const arm = (): void => {
        const left = due - clock.now()
        wait.handle = left > MAX_TIMER_MS ? clock.setTimeout(arm, MAX_TIMER_MS) : clock.setTimeout(fn, left)
      }
      arm()
      return wait
    },
    clearTimeout: (handle) => clock.clearTimeout(handle instanceof LongWait ? handle.handle : handle),
  }
}

/** The embedded default sink: used by inventories that name no sinkRefs. */
export const DEFAULT_SINK: ObjectRef = { namespace: '', name: 'default' }

export interface ExportEvent {
  sink: ObjectRef
  inventory: ObjectRef
  result: 'success' | 'failure'
  durationMs: number
  written?: WriteResult
  error?: Error
}

export interface DriftEvent {
  sink: ObjectRef
  inventory: ObjectRef
  /** in-step: the record holds the export; drifted: it differs and is left (Report); repaired; error: the check failed. */
  result: 'in-step' | 'drifted' | 'repaired' | 'error'
  differences: number
}

export interface ExporterObserver {
  onExport?(event: ExportEvent): void
  onDrift?(event: DriftEvent): void
  /** `pending`: the sinks of all inventories that owe an export; `bySink`: the same per sink, 0 included. */
  onPendingChange?(pending: number, bySink: readonly SinkPending[]): void
  /** The bytes of items held for a namespace's targets, and in total, after they changed. */
  onHeldChange?(namespace: string, namespaceBytes: number, totalBytes: number): void
  onReportRefused?(target: ObjectRef, limit: BudgetLimit): void
  /** A journal entry was not resumed: the targets' fresh reports built another snapshot, or it could not be read. */
  onJournalDropped?(reason: JournalDropReason): void
}

/** How many of its inventories' exports one sink owes (an alert on one sink must not read another's). */
export interface SinkPending {
  sink: ObjectRef
  pending: number
}

type JournalDropReason = 'superseded' | 'unreadable'

export type Log = (level: 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>) => void

export interface ExporterOptions {
  /** Default cluster label, overridden per sink by spec.cluster. */
  cluster: string
  /** Build a sink for a KollectSink, or the embedded default when `resolved` is null. */
  createSink(resolved: ResolvedSink | null): Promise<Sink>
  /**
   * Before every use of a built sink (write, drift check, removal, sink check): throws when the
   * sink may no longer use its Secret. A permanent refusal closes and forgets the pooled sink.
   */
  checkGrant?(resolved: ResolvedSink): Promise<void>
  clock?: Clock
  backoff?: BackoffPolicy
  observer?: ExporterObserver
  /** Bounds on the items held; unbounded when left out. */
  budget?: BudgetOptions
  /** Where exports that sinks still owe are kept across a restart; none when left out. */
  journal?: PendingJournal
  log?: Log
  /** Start as a standby (leader election): hold reports, write nothing until setActive(true). */
  standby?: boolean
  /**
   * Leader election's renew deadline: no sink write (or removal) starts unless leaseRenewed() was
   * called less than this long ago on the clock's monotonic time. No such check when left out.
   */
  renewDeadlineMs?: number
}
