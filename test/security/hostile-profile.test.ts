import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import type { KubeObject } from '../../api/types.js'
import { startHooksServer, type HooksServer } from '../support/hooks-server.js'
import { deployment, targetSyncRequest } from '../support/metacontroller.js'
import { ROUTES, conditionOf, percentile, profileWith, send, sleep, statusOf } from './support.js'

// A profile that would run for minutes (50,000 × 50,000 steps, macro depth 2, so it passes every
// static check) must cost one worker for the deadline, while normal syncs and /healthz go on.

const DEADLINE_MS = 1500
let server: HooksServer

const LIST = Array.from({ length: 50_000 }, (_, i) => String(i)).join(',')
const BIG = 'object.metadata.annotations.big'
const HOSTILE_CEL = `${BIG}.split(',').map(a, ${BIG}.split(',').map(b, a + b))`

function hostileBody(): string {
  const d: KubeObject = deployment(1)
  ;(d.metadata as Record<string, unknown>)['annotations'] = { big: LIST }
  return JSON.stringify(targetSyncRequest([d], { profile: profileWith([{ name: 'pairs', cel: HOSTILE_CEL }]) }))
}

const NORMAL = JSON.stringify(targetSyncRequest(Array.from({ length: 200 }, (_, i) => deployment(i))))

async function normalSync(): Promise<{ ms: number; status: number; extracted: unknown }> {
  const started = performance.now()
  const res = await send(server.url, ROUTES.targetSync, { body: NORMAL })
  const ms = performance.now() - started
  return { ms, status: res.status, extracted: res.status === 200 ? statusOf(res).extractedCount : res.text }
}

before(async () => {
  server = await startHooksServer({ KOLLECT_SYNC_TIMEOUT_MS: String(DEADLINE_MS), KOLLECT_EXTRACT_WORKERS: '2' })
  // Warm both workers (module loading, JIT) so the timings below measure steady state.
  await Promise.all([normalSync(), normalSync()])
})
after(async () => {
  await server.close()
})

test('a minutes-long profile times out at the deadline while normal syncs and /healthz stay fast', async (t) => {
  const hostile = hostileBody()
  const healthz: number[] = []
  const healthStatuses = new Set<number>()
  let probing = true
  const prober = (async () => {
    while (probing) {
      const started = performance.now()
      const res = await send(server.url, '/healthz', { method: 'GET' })
      healthz.push(performance.now() - started)
      healthStatuses.add(res.status)
      await sleep(20)
    }
  })()

  const hostileStarted = performance.now()
  const hostileDone = send(server.url, ROUTES.targetSync, { body: hostile }).then((res) => ({ res, ms: performance.now() - hostileStarted }))
  await sleep(50) // the hostile sync takes a worker first
  const normals = []
  // Spread over the hostile sync's 1.5 s, so every one of them runs while it burns a worker.
  for (let i = 0; i < 5; i++) {
    normals.push(await normalSync())
    await sleep(200)
  }
  const { res, ms: hostileMs } = await hostileDone
  probing = false
  await prober

  t.diagnostic(`normal syncs ${normals.map((n) => n.ms.toFixed(0)).join(', ')} ms; hostile ${hostileMs.toFixed(0)} ms; ` +
    `/healthz p99 ${percentile(healthz, 99).toFixed(1)} ms over ${healthz.length} probes`)
  for (const [i, n] of normals.entries()) {
    assert.equal(n.status, 200, `normal sync ${i}: ${String(n.extracted)}`)
    assert.equal(n.extracted, 200, `normal sync ${i}`)
    assert.ok(n.ms < 1000, `normal sync ${i} took ${n.ms.toFixed(0)} ms`)
  }

  assert.equal(res.status, 200, res.text)
  const ready = conditionOf(res, 'Ready')
  assert.deepEqual([ready?.status, ready?.reason], ['False', 'EvaluationTimeout'])
  assert.equal(ready?.message, `extraction did not finish within ${DEADLINE_MS} ms; simplify the profile or split the target`)
  assert.deepEqual([statusOf(res).matchedCount, statusOf(res).extractedCount, statusOf(res).checksum], [0, 0, ''])
  assert.ok(hostileMs >= 1400 && hostileMs <= 5000, `hostile sync answered after ${hostileMs.toFixed(0)} ms`)

  assert.deepEqual([...healthStatuses], [200])
  assert.ok(healthz.length >= 20, `only ${healthz.length} probes`)
  // A main thread that ran the profile would hold every probe for the whole deadline (1.5 s). The
  // bound sits well below that and well above a shared CI machine's noise (one probe took 106 ms
  // there while other builds ran): it tells isolation from its absence, not fast from slow (bench/tenants
  // measures latency under attack against latency alone).
  const p99 = percentile(healthz, 99)
  assert.ok(p99 < DEADLINE_MS / 3, `/healthz p99 ${p99.toFixed(1)} ms over ${healthz.length} probes (max ${Math.max(...healthz).toFixed(1)})`)
})

test('after the timeout the pool has replaced the worker and still serves', async () => {
  const results = await Promise.all([normalSync(), normalSync()])
  for (const r of results) {
    assert.equal(r.status, 200)
    assert.equal(r.extracted, 200)
  }
})

test('two hostile syncs at once take both workers; both time out and the pool recovers', async () => {
  const hostile = hostileBody()
  const started = performance.now()
  const answers = await Promise.all([send(server.url, ROUTES.targetSync, { body: hostile }), send(server.url, ROUTES.targetSync, { body: hostile })])
  const ms = performance.now() - started
  for (const res of answers) {
    assert.equal(res.status, 200)
    assert.equal(conditionOf(res, 'Ready')?.reason, 'EvaluationTimeout')
  }
  assert.ok(ms < 5000, `${ms.toFixed(0)} ms`)
  const health = await send(server.url, '/healthz', { method: 'GET' })
  assert.equal(health.status, 200)
  const after = await normalSync()
  assert.deepEqual([after.status, after.extracted], [200, 200])
})
