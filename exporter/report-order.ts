import type { TargetReport } from '../api/types.js'

/** What orders two reports of one target: the target's uid, generation and arrival stamp. */
export type ReportStamp = Pick<TargetReport, 'uid' | 'generation' | 'sequence'>

/**
 * True when `report` is older than `held`: same target uid, and (generation, sequence) lower.
 * A new uid is a recreated target, never stale against the old one. Without a uid or sequence on
 * either side (hooks before issue 16) there is no order, and the report is accepted as before.
 * resourceVersion is deliberately not compared: Kubernetes makes it opaque (equality only).
 */
export function isStaleReport(held: ReportStamp | undefined, report: ReportStamp): boolean {
  if (!held || held.uid === undefined || held.sequence === undefined) return false
  if (report.uid === undefined || report.sequence === undefined || report.uid !== held.uid) return false
  if (report.generation !== held.generation) return report.generation < held.generation
  return report.sequence < held.sequence
}

/** True when an object's reported generation is lower than the held item's; absent on either side means no order. */
export function isStaleItem(held: number | undefined, reported: number | null | undefined): boolean {
  return typeof held === 'number' && typeof reported === 'number' && reported < held
}
