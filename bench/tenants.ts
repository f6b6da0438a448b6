// Two tenants side by side against the server running as its own process (npm start's entry):
// team-a loops cost bombs and large outputs, and exports to an S3 sink whose endpoint refuses
// every request with a 3 MB error message (issue 24 F3); team-b sends ordinary syncs one after
// another (one target resyncing). The baseline is team-b alone, measured first in the same run.
// Targets: every team-b sync answers 200 within 2 s, its p99 under attack is at most 2× its p99
// alone, the server process survives, and the peak RSS of its process group stays under the
// limit its settings imply:
//   limit = main heap (--max-old-space-size) + (KOLLECT_EXTRACT_WORKERS + KOLLECT_EXTRACT_RESERVE)
//           × KOLLECT_WORKER_MEMORY_MB
// (no exporter item budget is configured here). Talks to 127.0.0.1 only and stops by itself.
import type { KubeObject } from '../api/types.js'
import { deniedS3, s3Sink } from '../test/security/hostile-peer.js'
import { HEAP_BOMB_CEL, QUADRATIC_CEL, doubling, exampleProfile, inventorySync, oneAttributeSync, ordinarySync, send, targetWith, withList } from '../test/security/support.js'
import { startKollectProcess } from '../test/support/kollect-process.js'
import { deployment, targetSyncRequest } from '../test/support/metacontroller.js'
import { percentile, report } from './stats.js'
import { isMainModule } from '../server/process/entry.js'

const SETTINGS = { mainHeapMb: 512, workers: 2, reserve: 1, workerMemoryMb: 256, timeoutMs: 8000 }

function teamA(target: string, cel: string, objects: KubeObject[]): Buffer {
  return Buffer.from(oneAttributeSync(cel, objects, target))
}

/** The S3 sink of team-a's F3 attack and its secret, as local mode reads it. */
const F3_SINK = 'oversized'
const F3_TARGET = 'f3-target'
const F3_ATTACK = 'oversized S3 error'
const F3_KEYS = { KOLLECT_SECRET_TEAM_A__OVERSIZED_KEYS__ACCESSKEYID: 'AKIAIOSFODNN7EXAMPLE', KOLLECT_SECRET_TEAM_A__OVERSIZED_KEYS__SECRETACCESSKEY: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY' }
let f3Round = 0

/** A new item for the F3 target each time, so each report is a change that the exporter sends to the S3 sink at once. */
function f3Report(): Buffer {
  f3Round += 1
  return Buffer.from(JSON.stringify(targetSyncRequest([deployment(f3Round)], { target: targetWith({}, F3_TARGET, 'team-a'), profile: exampleProfile('team-a') })))
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

/**
 * `only: 'oversized'` runs the oversized S3 error alone, from 4 clients, to tell its share of the
 * team-b figures from the expression attacks'.
 */
export async function benchTenants(aloneSeconds = 6, attackSeconds = 25, only?: 'oversized'): Promise<boolean> {
  const s3 = await deniedS3('A'.repeat(3 * 1024 * 1024))
  const kollect = await startKollectProcess({
    ...F3_KEYS,
    // The oversized S3 endpoint listens on 127.0.0.1.
    KOLLECT_ALLOW_PRIVATE_SINKS: 'true',
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
    const inventory = inventorySync({
      name: 'f3-inv', namespace: 'team-a', sinks: [s3Sink('team-a', F3_SINK, s3.url)], targets: [targetWith({}, F3_TARGET, 'team-a')],
      spec: { targetRefs: [{ name: F3_TARGET }], sinkRefs: [{ name: F3_SINK }], debounce: '1ms', maxWait: '1ms' },
    })
    await send(url, '/hooks/inventories/sync', { body: JSON.stringify(inventory) })
    until = performance.now() + attackSeconds * 1000
    const stop = () => performance.now() > until
    const flood = Array.from({ length: only ? 0 : 4 }, async (_, i) => {
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
    // Issue 24 F3, a fifth client: every report changes the inventory, so the exporter writes to
    // the S3 sink at once, whose endpoint answers 403 with 3 MB of text.
    const f3 = Array.from({ length: only ? 4 : 1 }, () => loop(url, f3Report, stop, (s) => {
      const key = `${F3_ATTACK}: ${s.status} ${readyReason(s.text)}`
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1)
    }))
    await loop(url, () => body, stop, (s) => underAttack.push(s))
    await Promise.all([...flood, ...f3])
    clearInterval(sampler)
    peakRss = Math.max(peakRss, kollect.rssBytes())

    const alive = !kollect.proc.hasExited() && kollect.proc.child.pid === pid && (await send(url, '/healthz', { method: 'GET' })).status === 200
    const f3Status = await send(url, '/hooks/inventories/sync', { body: JSON.stringify(inventory) })
    const f3Message = (JSON.parse(f3Status.text) as { status?: { sinks?: { message?: string }[] } }).status?.sinks?.[0]?.message ?? ''
    const s3Requests = s3.requests.length
    const replaced = children.size - childrenBefore
    const ms = (samples: Sample[]) => samples.filter((s) => s.status === 200).map((s) => s.ms)
    const [p50Alone, p99Alone, p50, p99] = [percentile(ms(alone), 50), percentile(ms(alone), 99), percentile(ms(underAttack), 50), percentile(ms(underAttack), 99)]
    const slow = underAttack.filter((s) => s.ms > 2000).length
    const failed = underAttack.filter((s) => s.status !== 200).length
    const limitMiB = SETTINGS.mainHeapMb + (SETTINGS.workers + SETTINGS.reserve) * SETTINGS.workerMemoryMb
    const peakMiB = Math.round(peakRss / 1024 / 1024)
    const attacked = [...outcomes].sort(([a], [b]) => (a < b ? -1 : 1))
    const floods = only ? `${F3_ATTACK}, 4 clients` : `${attacks('x').map((a) => a.kind).join(', ')}; 4 clients; ${F3_ATTACK}, 1 client`
    return report(`tenants: team-a floods (${floods}) while team-b syncs 50 Deployments, one at a time`, [
      ['team-b alone: syncs, p50 / p99', `${alone.length}, ${p50Alone.toFixed(0)} / ${p99Alone.toFixed(0)} ms`],
      ['team-b under attack: syncs, p50 / p99', `${underAttack.length}, ${p50.toFixed(0)} / ${p99.toFixed(0)} ms`],
      ['team-b ratio under attack / alone, p50 / p99', `${(p50 / p50Alone).toFixed(1)} / ${(p99 / p99Alone).toFixed(1)}`],
      [`${F3_ATTACK}: requests to the endpoint`, s3Requests],
      [`${F3_ATTACK}: sink message in status`, `${f3Message.length} characters`],
      ['team-b syncs over 2 s', slow],
      ['team-b syncs not answered 200', failed],
      ...underAttack.filter((s) => s.ms > 2000 || s.status !== 200).map((s): [string, string] => ['  team-b outlier', `${s.status} ${readyReason(s.text)} after ${s.ms.toFixed(0)} ms`]),
      ...attacked.map(([k, n]): [string, number] => [`team-a ${k}`, n]),
      ['extraction children replaced during the attack', `${replaced} (heap limit, fatal error or deadline)`],
      ['server process', alive ? `alive, same pid ${pid}` : 'DIED'],
      ['peak RSS of the process group', `${peakMiB} MiB`],
      ['limit: main heap + (workers + reserve) × child heap',
        `${SETTINGS.mainHeapMb} + ${SETTINGS.workers + SETTINGS.reserve} × ${SETTINGS.workerMemoryMb} = ${limitMiB} MiB (peak / limit ${(peakMiB / limitMiB).toFixed(2)})`],
    ], [
      ['team-b: no sync over 2 s', slow === 0], ['team-b: every sync 200', failed === 0], ['team-b: p99 under attack ≤ 2 × alone', p99 <= 2 * p99Alone],
      ['the server process survived', alive], ['peak RSS under the limit', peakMiB < limitMiB],
    ])
  } finally {
    clearInterval(sampler)
    await kollect.close()
    await s3.close()
  }
}

if (isMainModule(import.meta.url)) {
  process.exitCode = (await benchTenants(undefined, undefined, process.argv[2] === 'oversized' ? 'oversized' : undefined)) ? 0 : 1
}
