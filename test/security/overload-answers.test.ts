import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { startHooksServer, type HooksServer, type RawResponse } from '../support/hooks-server.js'
import { conditionOf, ordinarySync, ROUTES, send, sleep, statusOf } from './support.js'

// Issue 24, F14: in a burst of large syncs some answered 503 KOLLECT_ERR_HOOK_TIMEOUT at the
// deadline: a sync that got an extraction process but whose body was not yet parsed when its
// deadline came had no parent to build a status from. Overload must answer the documented way:
// 429 with Retry-After, or 200 with Ready=False EvaluationTimeout, never a 503.
// Small limits (one process, no reserve, a short deadline) make the saturation certain rather
// than a matter of the machine's load.

/** What a client may see under overload; returns a label for the diagnostic. */
function assertOverloadAnswer(res: RawResponse, retryAfter: string): string {
  if (res.status === 200) {
    const ready = conditionOf(res, 'Ready')
    assert.ok(ready?.reason === 'Extracted' || ready?.reason === 'EvaluationTimeout', res.text)
    return `200 ${ready.reason}`
  }
  assert.equal(res.status, 429, `${res.status} ${res.text}`)
  assert.equal(res.headers['retry-after'], retryAfter, res.text)
  const { code } = res.json() as { code: string }
  assert.ok(code === 'KOLLECT_ERR_HOOK_QUEUE_TIMEOUT' || code === 'KOLLECT_ERR_HOOK_BUSY', res.text)
  return `429 ${code.replace('KOLLECT_ERR_HOOK_', '')}`
}

/** /healthz answers all through `during`; returns the slowest probe in milliseconds. */
async function probingHealthz(server: HooksServer, during: Promise<unknown>): Promise<number> {
  let done = false
  void during.finally(() => { done = true })
  let slowest = 0
  let probes = 0
  while (!done || probes === 0) {
    const started = performance.now()
    const res = await send(server.url, '/healthz', { method: 'GET' })
    assert.equal(res.status, 200)
    slowest = Math.max(slowest, performance.now() - started)
    probes++
    await sleep(20)
  }
  return slowest
}

describe('a sync whose deadline comes before its body is parsed (KOLLECT_SYNC_TIMEOUT_MS=5)', () => {
  let server: HooksServer
  before(async () => {
    server = await startHooksServer({ KOLLECT_EXTRACT_WORKERS: '1', KOLLECT_EXTRACT_RESERVE: '0', KOLLECT_SYNC_TIMEOUT_MS: '5' })
  })
  after(async () => {
    await server.close()
  })

  test('one sync: 429 KOLLECT_ERR_HOOK_BUSY with Retry-After, not 503', async () => {
    // The sync starts on the idle process at once; its deadline passes before the process can
    // have parsed 400 Deployments and said so.
    const res = await send(server.url, ROUTES.targetSync, { body: ordinarySync('team-a', 400) })
    assert.equal(res.status, 429, res.text)
    assert.equal(res.headers['retry-after'], '1')
    assert.deepEqual(res.json(), { code: 'KOLLECT_ERR_HOOK_BUSY', message: 'the extraction processes are too busy: the sync was not parsed within 5 ms of its arrival; retry after 1 seconds' })
    const metrics = await send(server.url, '/metrics', { method: 'GET' })
    assert.match(metrics.text, /kollect_hook_shed_total\{reason="busy"\} 1\b/)
  })

  test('a burst of 10: every answer is a 429 with Retry-After; /healthz answers throughout', async (t) => {
    const burst = Promise.all(Array.from({ length: 10 }, (_, i) => send(server.url, ROUTES.targetSync, { body: ordinarySync(`team-${i % 3}`, 400, `burst-${i}`) })))
    const slowest = await probingHealthz(server, burst)
    const labels = (await burst).map((r) => assertOverloadAnswer(r, '1'))
    t.diagnostic(`${labels.join(', ')}; slowest /healthz ${slowest.toFixed(0)} ms`)
    assert.ok(labels.every((l) => l.startsWith('429')))
    assert.ok(slowest < 5000, `a /healthz probe took ${slowest.toFixed(0)} ms`)
  })
})

describe('a burst of large syncs on one extraction process with a 2 s deadline', () => {
  let server: HooksServer
  before(async () => {
    server = await startHooksServer({ KOLLECT_EXTRACT_WORKERS: '1', KOLLECT_EXTRACT_RESERVE: '0', KOLLECT_SYNC_TIMEOUT_MS: '2000' })
  })
  after(async () => {
    await server.close()
  })

  test('12 syncs of 2,000 objects: each is 200 (Extracted or EvaluationTimeout) or 429 with Retry-After; /healthz answers throughout', async (t) => {
    const bodies = Array.from({ length: 12 }, (_, i) => ordinarySync(`team-${i % 4}`, 2000, `big-${i}`))
    const burst = Promise.all(bodies.map((body) => send(server.url, ROUTES.targetSync, { body })))
    const slowest = await probingHealthz(server, burst)
    const answers = await burst
    const labels = answers.map((r) => assertOverloadAnswer(r, '1'))
    t.diagnostic(`${labels.join(', ')}; slowest /healthz ${slowest.toFixed(0)} ms`)
    for (const r of answers) if (r.status === 200 && conditionOf(r, 'Ready')?.reason === 'Extracted') assert.equal(statusOf(r).extractedCount, 2000)
    assert.ok(slowest < 5000, `a /healthz probe took ${slowest.toFixed(0)} ms`)
  })
})
