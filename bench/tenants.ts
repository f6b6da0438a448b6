// Two tenants side by side against the server running as its own process (npm start's entry):
// team-a loops cost bombs and large outputs, team-b sends ordinary syncs one after another
// (one target resyncing). The baseline is team-b alone, measured first in the same run.
// Targets: every team-b sync answers 200 within 2 s, the server process survives, and the
// peak RSS of its process group stays under the limit its settings imply:
//   limit = main heap (--max-old-space-size) + (KOLLECT_EXTRACT_WORKERS + KOLLECT_EXTRACT_RESERVE)
//           × KOLLECT_WORKER_MEMORY_MB
// (no exporter item budget is configured here). Talks to 127.0.0.1 only and stops by itself.
import type { KubeObject } from '../api/types.js'
import { HEAP_BOMB_CEL, QUADRATIC_CEL, doubling, oneAttributeSync, ordinarySync, send, withList } from '../test/security/support.js'
import { startKollectProcess } from '../test/support/kollect-process.js'
import { deployment } from '../test/support/metacontroller.js'
import { percentile, report } from './stats.js'

const SETTINGS = { mainHeapMb: 512, workers: 2, reserve: 1, workerMemoryMb: 256, timeoutMs: 8000 }

function teamA(target: string, cel: string, objects: KubeObject[]): Buffer {
  return Buffer.from(oneAttributeSync(cel, objects, target))
}

/** team-a's rotation: each kind is a different way to hurt the shared service. */
function attacks(target: string): { kind: string; body: Buffer }[] {
  return [
    // Macro depth 2 over 50,000 elements: burns a child until the deadline.
    { kind: 'quadratic', body: teamA(target, QUADRATIC_CEL, [withList(50_000)]) },
    // Ended the whole process before issue 8; now a size bound.
    { kind: 'string bomb', body: teamA(target, doubling(26, "'ab'", (s) => `${s}.split('')`), [deployment(1)]) },
    { kind: 'list bomb', body: teamA(target, doubling(26, '[1, 2]', (s) => `size(${s})`), [deployment(1)]) },
    // Every value within the bounds, 25 million of them: the child's heap limit kills it.
    { kind: 'heap bomb', body: teamA(target, HEAP_BOMB_CEL, [withList(5000)]) },
    // 500 objects of ~36 KiB each (a name doubled 12 times, under the 64 KiB item bound): 18 MiB of items.
    { kind: 'large output', body: teamA(target, doubling(12, 'object.metadata.name', (s) => s), Array.from({ length: 500 }, (_, i) => deployment(i))) },
  ]
}

interface Sample {
  ms: number
  status: number
  text: string
}

/** Syncs one after another until `stop()`, waiting out Retry-After on a 429 as Metacontroller does. */
async function loop(url: string, next: () => Buffer, stop: () => boolean, record: (s: Sample) => void): Promise<void> {
  while (!stop()) {
    const started = performance.now()
    const res = await send(url, '/hooks/targets/sync', { body: next() })
    record({ ms: performance.now() - started, status: res.status, text: res.text })
    if (res.status === 429) await new Promise((r) => setTimeout(r, 1000 * Number(res.headers['retry-after'] ?? 1)))
  }
}

function readyReason(text: string): string {
  try {
    const body = JSON.parse(text) as { status?: { conditions?: { type: string; reason: string }[] }; code?: string }
    return body.code ?? body.status?.conditions?.find((c) => c.type === 'Ready')?.reason ?? '?'
  } catch {
    return 'not JSON'
  }
}

export async function benchTenants(aloneSeconds = 6, attackSeconds = 25): Promise<boolean> {
  const kollect = await startKollectProcess({
    KOLLECT_EXTRACT_WORKERS: String(SETTINGS.workers),
    KOLLECT_EXTRACT_RESERVE: String(SETTINGS.reserve),
    KOLLECT_WORKER_MEMORY_MB: String(SETTINGS.workerMemoryMb),
    KOLLECT_SYNC_TIMEOUT_MS: String(SETTINGS.timeoutMs),
    KOLLECT_LOG_LEVEL: 'error',
  }, [`--max-old-space-size=${SETTINGS.mainHeapMb}`, '--max-semi-space-size=32'])
  const pid = kollect.proc.child.pid
  let peakRss = 0
  // Every extraction child seen: a child lives at least its start-up (~0.3 s), so none is missed.
  const children = new Set<number>(kollect.extractionPids())
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, kollect.rssBytes())
    for (const p of kollect.extractionPids()) children.add(p)
  }, 100)
  try {
    const url = kollect.url
    const body = Buffer.from(ordinarySync('team-b', 50, 'b-0'))
    const alone: Sample[] = []
    const underAttack: Sample[] = []
    // Warm-up, then team-b alone.
    for (let i = 0; i < 5; i++) await send(url, '/hooks/targets/sync', { body })
    let until = performance.now() + aloneSeconds * 1000
    await loop(url, () => body, () => performance.now() > until, (s) => alone.push(s))

    const childrenBefore = children.size
    const outcomes = new Map<string, number>()
    until = performance.now() + attackSeconds * 1000
    const stop = () => performance.now() > until
    const flood = Array.from({ length: 4 }, async (_, i) => {
      const rotation = attacks(`flood-${i}`)
      let n = i
      let kind = ''
      await loop(url, () => {
        const attack = rotation[n++ % rotation.length] as { kind: string; body: Buffer }
        kind = attack.kind
        return attack.body
      }, stop, (s) => {
        const key = `${kind}: ${s.status} ${readyReason(s.text)}`
        outcomes.set(key, (outcomes.get(key) ?? 0) + 1)
      })
    })
    await loop(url, () => body, stop, (s) => underAttack.push(s))
    await Promise.all(flood)
    clearInterval(sampler)
    peakRss = Math.max(peakRss, kollect.rssBytes())

    const alive = !kollect.proc.hasExited() && kollect.proc.child.pid === pid && (await send(url, '/healthz', { method: 'GET' })).status === 200
    const replaced = children.size - childrenBefore
    const ms = (samples: Sample[]) => samples.filter((s) => s.status === 200).map((s) => s.ms)
    const [p50Alone, p99Alone, p50, p99] = [percentile(ms(alone), 50), percentile(ms(alone), 99), percentile(ms(underAttack), 50), percentile(ms(underAttack), 99)]
    const slow = underAttack.filter((s) => s.ms > 2000).length
    const failed = underAttack.filter((s) => s.status !== 200).length
    const limitMiB = SETTINGS.mainHeapMb + (SETTINGS.workers + SETTINGS.reserve) * SETTINGS.workerMemoryMb
    const peakMiB = Math.round(peakRss / 1024 / 1024)
    const attacked = [...outcomes].sort(([a], [b]) => (a < b ? -1 : 1))
    return report(`tenants: team-a floods (${attacks('x').map((a) => a.kind).join(', ')}; 4 clients) while team-b syncs 50 Deployments, one at a time`, [
      ['team-b alone: syncs, p50 / p99', `${alone.length}, ${p50Alone.toFixed(0)} / ${p99Alone.toFixed(0)} ms`],
      ['team-b under attack: syncs, p50 / p99', `${underAttack.length}, ${p50.toFixed(0)} / ${p99.toFixed(0)} ms`],
      ['team-b ratio under attack / alone, p50 / p99', `${(p50 / p50Alone).toFixed(1)} / ${(p99 / p99Alone).toFixed(1)}`],
      ['team-b syncs over 2 s', slow],
      ['team-b syncs not answered 200', failed],
      ...underAttack.filter((s) => s.ms > 2000 || s.status !== 200).map((s): [string, string] => ['  team-b outlier', `${s.status} ${readyReason(s.text)} after ${s.ms.toFixed(0)} ms`]),
      ...attacked.map(([k, n]): [string, number] => [`team-a ${k}`, n]),
      ['extraction children replaced during the attack', `${replaced} (heap limit, fatal error or deadline)`],
      ['server process', alive ? `alive, same pid ${pid}` : 'DIED'],
      ['peak RSS of the process group', `${peakMiB} MiB`],
      ['limit: main heap + (workers + reserve) × child heap', `${SETTINGS.mainHeapMb} + ${SETTINGS.workers + SETTINGS.reserve} × ${SETTINGS.workerMemoryMb} = ${limitMiB} MiB (peak / limit ${(peakMiB / limitMiB).toFixed(2)})`],
    ], [['team-b: no sync over 2 s', slow === 0], ['team-b: every sync 200', failed === 0], ['the server process survived', alive], ['peak RSS under the limit', peakMiB < limitMiB]])
  } finally {
    clearInterval(sampler)
    await kollect.close()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.exitCode = (await benchTenants()) ? 0 : 1
}
