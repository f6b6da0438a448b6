// Kubernetes-style durations: "500ms", "10s", "2m", "1h30m".
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }
const PART = /([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)/y

export function parseDuration(text: string): number | null {
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

export function formatDuration(ms: number): string {
  if (ms % 3_600_000 === 0 && ms > 0) return `${ms / 3_600_000}h`
  if (ms % 60_000 === 0 && ms > 0) return `${ms / 60_000}m`
  if (ms % 1000 === 0) return `${ms / 1000}s`
  return `${ms}ms`
}
