// Shared helpers: benchmarks print ratios against a baseline measured in the same run, since
// the machines are shared and noisy; medians of several rounds damp the noise further.
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

let gc: (() => void) | undefined

/** A full collection of this process's heap (V8's gc, exposed on first use), so a measurement starts on a collected heap. */
export function collectGarbage(): void {
  if (!gc) {
    setFlagsFromString('--expose-gc')
    gc = runInNewContext('gc') as () => void
  }
  gc()
}

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2
}

export function percentile(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0
}

export function timeMs(fn: () => void): number {
  const t = process.hrtime.bigint()
  fn()
  return Number(process.hrtime.bigint() - t) / 1e6
}

export async function timeMsAsync(fn: () => Promise<unknown>): Promise<number> {
  const t = process.hrtime.bigint()
  await fn()
  return Number(process.hrtime.bigint() - t) / 1e6
}

export function peakRssMiB(): number {
  return Math.round(process.resourceUsage().maxRSS / 1024)
}

export function report(title: string, rows: [string, string | number][], targets: [string, boolean][] = []): boolean {
  console.log(`\n== ${title}`)
  for (const [k, v] of rows) console.log(`  ${k.padEnd(44)} ${v}`)
  for (const [k, ok] of targets) console.log(`  target ${k.padEnd(37)} ${ok ? 'met' : 'MISSED'}`)
  return targets.every(([, ok]) => ok)
}
