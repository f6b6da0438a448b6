// Kubernetes-style durations: "500ms", "10s", "2m", "1h30m".
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }
const PART = /([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)/y

/**
 * The longest debounce, maxWait, minDebounce, drift interval and review poll interval: a week.
 * The CRDs refuse longer ones (x-kubernetes-validations), the hooks too (for clusters whose
 * admission was bypassed), and the exporter's timers wait any length in steps of at most 2^31-1 ms.
 */
export const MAX_DURATION_MS = 168 * 3_600_000
/** The longest retention (postgres snapshotMaxAge, nats maxAge): ten years. */
export const MAX_RETENTION_MS = 87_600 * 3_600_000

/** Milliseconds, or null for text that is not a duration or too long to be one (past ten years). */
export function parseDuration(text: string): number | null {
  const ms = spelledMs(text)
  return ms !== null && Number.isSafeInteger(ms) && ms <= MAX_RETENTION_MS ? ms : null
}

/** The text's milliseconds however large (Infinity for hundreds of digits), or null when it is not a duration. */
function spelledMs(text: unknown): number | null {
  if (typeof text !== 'string' || text === '') return null
  let total = 0
  PART.lastIndex = 0
  while (PART.lastIndex < text.length) {
    const m = PART.exec(text)
    if (!m) return null
    total += Number(m[1]) * (UNIT_MS[m[2] as string] as number)
  }
  return Math.round(total)
}

/** Why a field's duration is refused (`spec.debounce: …`), or null when it is one of at most maxMs. */
export function durationProblem(field: string, text: unknown, maxMs: number): string | null {
  const shown = JSON.stringify(String(text).slice(0, 64))
  const ms = spelledMs(text)
  if (ms === null) return `${field}: ${shown} is not a duration such as 10s, 2m or 1h30m`
  return ms > maxMs ? `${field}: ${shown} is longer than the maximum ${formatDuration(maxMs)}` : null
}

export function formatDuration(ms: number): string {
  if (ms % 3_600_000 === 0 && ms > 0) return `${ms / 3_600_000}h`
  if (ms % 60_000 === 0 && ms > 0) return `${ms / 60_000}m`
  if (ms % 1000 === 0) return `${ms / 1000}s`
  return `${ms}ms`
}
