// The extraction pool's contract: how it is set up, and what one sync comes back as.
import type { KubeObject } from '../../api/types.js'
import type { ExpressionLimits } from '../../hooks/limits.js'
import type { TargetSyncResult } from '../../hooks/target.js'
import type { PluralResolver } from '../cluster/discovery.js'
import type { Scan } from '../protocol/json-depth.js'
import type { ChildPhases, ReportSummary } from './child.js'

export interface PoolOptions {
  /** Child processes shared by every namespace; default one per CPU, at least 2. */
  size?: number
  /** More children that only take a sync from a namespace with nothing running whose recent syncs were short. */
  reserve?: number
  /** Wall-clock budget of one sync, counted from its arrival. */
  timeoutMs: number
  /** Heap limit of a child; a sync that needs more ends that child, not the server. */
  memoryMb: number
  limits: ExpressionLimits
  resolvePlural: PluralResolver
  /** Where child deaths and internal errors are reported (never request data). */
  log?: (message: string, fields: Record<string, unknown>) => void
}

/** A sync's arrival (performance.now()) and the namespace that queues it (null: unknown). */
export interface JobInfo {
  arrival: number
  namespace: string | null
  /** Ask for each object's record (server/extraction/incremental.ts). */
  records?: boolean
  /** What scanJson() gave for the body, scanned as it arrived: the child does not scan it again. */
  scanned?: Scan.Plain | Scan.Suspect
}

export type StopReason = 'EvaluationTimeout' | 'ResourceLimit'

/** Where a sync's time went, in milliseconds: the child's phases, the pipe both ways and the result's parse here. */
interface PoolPhases extends ChildPhases {
  handOff: number
  resultParse: number
}

/** A finished sync: its answer, and its report as the child serialised it (no sequence yet). */
export interface ChildResult extends Omit<TargetSyncResult, 'report'> {
  /** changes: the report of changes since the one the target's kept records made (TargetReport.base), when there is one. */
  report: (ReportSummary & { json: Buffer; changes?: Buffer }) | null
  /** The records' JSON (records-wire.ts), about the report's items, and how many objects they are, when asked for and every object was tallied. */
  records?: { meta: Buffer; objects: number }
}

export type PoolOutcome =
  | { kind: 'done'; result: ChildResult; phases: PoolPhases }
  | { kind: 'bad'; code: 'KOLLECT_ERR_HOOK_BAD_JSON' | 'KOLLECT_ERR_HOOK_BAD_REQUEST' | 'KOLLECT_ERR_HOOK_TOO_DEEP'; message: string }
  | { kind: 'aborted'; reason: StopReason; message: string; parent: KubeObject | null }
  /** Still queued when too little of its budget was left to start: answer 429. */
  | { kind: 'queued'; waitedMs: number }
  /** Started, but stopped before its parent was read (so no status can be built): answer 429. */
  | { kind: 'busy'; message: string }
