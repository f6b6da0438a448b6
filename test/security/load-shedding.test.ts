import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { startHooksServer, type HooksServer, type RawResponse } from '../support/hooks-server.js'
import { deployment, targetSyncRequest } from '../support/metacontroller.js'
import { ROUTES, holdRequest, send, sleep, statusOf } from './support.js'

// In-flight bounds answer 429 with Retry-After instead of queueing without limit; probes are
// never shed; nothing answers 5xx under the burst.

const OVERLOADED = { code: 'KOLLECT_ERR_HOOK_OVERLOADED', message: 'too much work in flight; retry after 1 seconds' }
const LARGE = JSON.stringify(targetSyncRequest(Array.from({ length: 1000 }, (_, i) => deployment(i)))) // ~2.6 MB
const KIB600 = (() => {
  // A target sync of ~600 KiB (240 Deployments ≈ 614 KB).
  const body = JSON.stringify(targetSyncRequest(Array.from({ length: 240 }, (_, i) => deployment(i))))
  assert.ok(body.length > 600 * 1024 && body.length < 700 * 1024, `${body.length} bytes`)
  return body
})()

function assertShed(res: RawResponse): void {
  assert.equal(res.status, 429)
  assert.equal(res.headers['retry-after'], '1')
  assert.deepEqual(res.json(), OVERLOADED)
}

async function probe(server: HooksServer, path: string): Promise<number> {
  return (await send(server.url, path, { method: 'GET' })).status
}

describe('KOLLECT_MAX_INFLIGHT_REQUESTS=2', () => {
  let server: HooksServer
  before(async () => {
    server = await startHooksServer({ KOLLECT_MAX_INFLIGHT_REQUESTS: '2' })
  })
  after(async () => {
    await server.close()
  })

  test('10 concurrent large target syncs: some 429 with Retry-After, the rest 200, no 5xx; /healthz is never shed', async (t) => {
    const probes: number[] = []
    let probing = true
    const prober = (async () => {
      while (probing) {
        probes.push(await probe(server, '/healthz'))
        await sleep(5)
      }
    })()
    const answers = await Promise.all(Array.from({ length: 10 }, () => send(server.url, ROUTES.targetSync, { body: LARGE })))
    probing = false
    await prober

    const statuses = answers.map((r) => r.status)
    t.diagnostic(`statuses ${statuses.join(' ')}; ${probes.length} healthz probes`)
    assert.deepEqual(statuses.filter((s) => s !== 200 && s !== 429), [], 'only 200 and 429')
    const shed = answers.filter((r) => r.status === 429)
    const ok = answers.filter((r) => r.status === 200)
    assert.ok(shed.length >= 1, 'some requests are shed')
    assert.ok(ok.length >= 1, 'some requests are served')
    shed.forEach(assertShed)
    for (const r of ok) assert.equal(statusOf(r).extractedCount, 1000)
    assert.ok(probes.length >= 1)
    assert.deepEqual([...new Set(probes)], [200])

    const metrics = await send(server.url, '/metrics', { method: 'GET' })
    assert.match(metrics.text, new RegExp(`kollect_hook_shed_total\\{reason="requests"\\} ${shed.length}\\b`))
  })

  test('a shed request succeeds when retried after Retry-After', async () => {
    await sleep(1000)
    const res = await send(server.url, ROUTES.targetSync, { body: LARGE })
    assert.equal(res.status, 200)
    assert.equal(statusOf(res).extractedCount, 1000)
  })

  test('with two hooks held in flight, a third is shed while /healthz, /readyz and /metrics answer', async () => {
    const held = [holdRequest(server.url, ROUTES.targetSync, KIB600), holdRequest(server.url, ROUTES.targetSync, KIB600)]
    await sleep(100)
    assertShed(await send(server.url, ROUTES.inventorySync, { body: '{}' }))
    assert.deepEqual(await Promise.all(['/healthz', '/readyz', '/metrics'].map((p) => probe(server, p))), [200, 200, 200])
    held.forEach((h) => h.finish())
    for (const h of held) assert.equal((await h.response).status, 200)
    // The slots are released: the next request is served.
    assert.equal((await send(server.url, ROUTES.targetSync, { body: KIB600 })).status, 200)
  })

  test('a request whose client goes away releases its slot', async () => {
    const held = [holdRequest(server.url, ROUTES.targetSync, KIB600), holdRequest(server.url, ROUTES.targetSync, KIB600)]
    held.forEach((h) => h.response.catch(() => undefined))
    await sleep(100)
    assertShed(await send(server.url, ROUTES.targetSync, { body: KIB600 }))
    // Abort both uploads mid-body.
    for (const h of held) h.abort()
    await sleep(200)
    assert.equal((await send(server.url, ROUTES.targetSync, { body: KIB600 })).status, 200)
  })

  test('a percent-encoded hook path (/%68ooks/targets/sync) is shed like /hooks/targets/sync', async () => {
    // Known bug: hooks-app.ts checks request.url.startsWith('/hooks/') on the raw URL, but the
    // router decodes %68 to "h": such requests skip the in-flight bounds (and the token check).
    const held = [holdRequest(server.url, ROUTES.targetSync, KIB600), holdRequest(server.url, ROUTES.targetSync, KIB600)]
    await sleep(100)
    try {
      const res = await send(server.url, ROUTES.targetSync, { rawPath: '/%68ooks/targets/sync', body: KIB600 })
      assert.equal(res.status, 429, `answered ${res.status} while 2 of 2 slots were taken`)
    } finally {
      held.forEach((h) => h.finish())
      await Promise.all(held.map((h) => h.response))
    }
  })
})

describe('KOLLECT_MAX_INFLIGHT_BYTES=1 MiB', () => {
  let server: HooksServer
  before(async () => {
    server = await startHooksServer({ KOLLECT_MAX_INFLIGHT_BYTES: String(1024 * 1024) })
  })
  after(async () => {
    await server.close()
  })

  test('3 concurrent 600 KiB bodies: at least one 429, the others 200', async (t) => {
    // Each upload pauses after its first KiB, so all three are in flight together.
    const held = [0, 1, 2].map(() => holdRequest(server.url, ROUTES.targetSync, KIB600))
    await sleep(100)
    held.forEach((h) => h.finish())
    const answers = await Promise.all(held.map((h) => h.response))
    t.diagnostic(`statuses ${answers.map((r) => r.status).join(' ')}`)
    assert.deepEqual(answers.filter((r) => r.status !== 200 && r.status !== 429).map((r) => r.status), [])
    const shed = answers.filter((r) => r.status === 429)
    assert.ok(shed.length >= 1, 'at least one is shed')
    shed.forEach(assertShed)
    assert.ok(answers.some((r) => r.status === 200))
    const metrics = await send(server.url, '/metrics', { method: 'GET' })
    assert.match(metrics.text, /kollect_hook_shed_total\{reason="bytes"\} [1-9]/)
  })

  test('3 concurrent 600 KiB bodies fired at once: at least one 429, none 5xx', async () => {
    // Three different bodies: one already answered would be answered again from the recent
    // answers (KOLLECT_UNCHANGED_SYNCS) in a few milliseconds, too soon to be in flight together.
    const bodies = [0, 1, 2].map((n) => KIB600.replace('"resourceVersion":"100000"', `"resourceVersion":"${900_000 + n}"`))
    assert.equal(new Set(bodies).size, 3)
    const answers = await Promise.all(bodies.map((body) => send(server.url, ROUTES.targetSync, { body })))
    assert.ok(answers.every((r) => r.status === 200 || r.status === 429), answers.map((r) => r.status).join(' '))
    assert.ok(answers.some((r) => r.status === 429), answers.map((r) => r.status).join(' '))
  })

  test('one body larger than the whole byte budget is still served when nothing else is in flight', async () => {
    const body = JSON.stringify(targetSyncRequest(Array.from({ length: 500 }, (_, i) => deployment(i))))
    assert.ok(body.length > 1024 * 1024)
    assert.equal((await send(server.url, ROUTES.targetSync, { body })).status, 200)
  })

  test('chunked bodies (no Content-Length) count against the byte budget too', async () => {
    // Known bug: hooks-app.ts counts Number(content-length ?? 0) bytes, so chunked uploads count
    // as 0 and three 600 KiB chunked bodies are all admitted under a 1 MiB budget.
    const held = [0, 1, 2].map(() => holdRequest(server.url, ROUTES.targetSync, KIB600, { chunked: true }))
    await sleep(100)
    held.forEach((h) => h.finish())
    const answers = await Promise.all(held.map((h) => h.response))
    assert.ok(answers.some((r) => r.status === 429), `statuses ${answers.map((r) => r.status).join(' ')}`)
  })
})
