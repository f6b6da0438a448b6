import type { ResolvedSink } from '../api/types.js'
import { MAX_DURATION_MS, formatDuration, parseDuration } from '../api/duration.js'
import type { DriftMode, DriftResult } from '../sinks/sink.js'

const DEFAULT_DRIFT_INTERVAL_MS = 10 * 60_000
/** A check reads the whole record: more often than this costs more than it can find. */
const MIN_DRIFT_INTERVAL_MS = 60_000

export interface DriftSettings {
  /** null: policy Off, never check. */
  mode: DriftMode | null
  intervalMs: number
}

/** The sink's drift policy; the embedded default (no KollectSink) repairs every 10 minutes. */
export function driftSettings(resolved: ResolvedSink | null): DriftSettings {
  const drift = resolved?.spec.drift
  const policy = drift?.policy ?? 'Repair'
  const parsed = drift?.interval ? parseDuration(drift.interval) : null
  return {
    mode: policy === 'Off' ? null : policy === 'Report' ? 'report' : 'repair',
    intervalMs: Math.min(MAX_DURATION_MS, Math.max(MIN_DRIFT_INTERVAL_MS, parsed ?? DEFAULT_DRIFT_INTERVAL_MS)),
  }
}

/** The status message of a sink whose drift check failed: stable across retries, like a failing write's. */
export function checkFailedMessage(error: Error): string {
  return `drift check failed, retrying with backoff: ${error.message}`
}

/** The status message of a sink whose record differs from the export and is left as it is. */
export function driftMessage(result: DriftResult, intervalMs: number): string {
  const n = result.differences
  const examples = result.examples.length > 0 ? ` (${result.examples.join(', ')}${n > result.examples.length ? ', …' : ''})` : ''
  return `${n === 1 ? '1 item differs' : `${n} items differ`} from the last export${examples}, changed outside Kollect; ` +
    `drift policy Report leaves them (checked every ${formatDuration(intervalMs)}); set spec.drift.policy Repair to write the export back`
}
