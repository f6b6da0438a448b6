import type { HeldReport, SerialisedReport, TargetReport } from './types.js'

/** The report a SerialisedReport holds, parsed; any other report as it is. */
export function parsedReport(report: TargetReport | SerialisedReport): TargetReport {
  if (!('json' in report)) return report
  return JSON.parse(Buffer.from(report.json.buffer, report.json.byteOffset, report.json.byteLength).toString('utf8')) as TargetReport
}

/**
 * The child's report JSON with the hooks server's arrival stamp put first: `{"sequence":N,` and
 * the rest after its opening brace, so the items are not parsed or serialised again for it.
 */
export function withSequence(json: Uint8Array, sequence: number): Uint8Array {
  // A report always has its target first: an object with at least one key.
  if (json[0] !== 0x7b || json[1] === 0x7d) throw new Error('a serialised target report must be a non-empty JSON object')
  return Buffer.concat([Buffer.from(`{"sequence":${sequence},`), json.subarray(1)])
}

/** Which report this is (HeldReport), without its items or anything else it carries. */
export function heldReport(report: HeldReport): HeldReport {
  const { target, uid, generation, checksum } = report
  return { target, ...(uid ? { uid } : {}), generation, checksum }
}
