import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import type { ExporterClient, ReportResult, TargetReport } from '../../../api/types.js'
import { httpExporterClient } from '../../../server/exporter-api/client.js'
import { EXPORTER_ROUTES } from '../../../server/exporter-api/routes.js'
import { buildExporterApp, reportBodyLimit } from '../../../server/exporter-api/server.js'
import { createLogger } from '../../../server/process/logger.js'
import { createMetrics } from '../../../server/process/metrics.js'
import { composition, harness, itemsOf, LIMIT, report, resolvedSink, T1, T2 } from './harness.js'

// The exporter's loopback API carries a refusal back to the hooks, refuses a report body larger
// than any namespace could hold before reading it, and gets one report at a time.

const AUTH = { mode: 'token', token: 'api-token' } as const

/** A listening exporter app; its base URL. */
async function listen(t: TestContext, exporter: ExporterClient, reportLimit: number): Promise<string> {
  const app = await buildExporterApp({
    exporter, auth: AUTH, bodyLimit: 1024 * 1024, reportBodyLimit: reportLimit, maxJsonDepth: 512, logger: createLogger('silent', 'test'), metrics: createMetrics('exporter'),
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => app.close())
  const address = app.server.address()
  return `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
}

async function serve(t: TestContext, exporter: ExporterClient, reportLimit: number): Promise<ReturnType<typeof httpExporterClient>> {
  return httpExporterClient(await listen(t, exporter, reportLimit), AUTH)
}

test('a refusal crosses the API as it left the exporter; an accepted report as accepted', LIMIT, async (t) => {
  const h = harness(t, { budget: { maxBytes: 1_000_000_000, namespaceShare: 40_000 / 1_000_000_000 } })
  const client = await serve(t, h.exporter, reportBodyLimit(40_000))
  const direct = await h.exporter.reportTarget(report(T1, itemsOf(T1, 5)))
  assert.deepEqual(direct, { accepted: true })
  assert.deepEqual(await client.reportTarget(report(T2, itemsOf(T2, 5, 100))), await h.exporter.reportTarget(report(T2, itemsOf(T2, 5, 100))))
  const refused = await client.reportTarget(report(T2, itemsOf(T2, 50, 100)))
  assert.equal(refused.accepted, false)
  assert.match((refused as { message: string }).message, /^the exporter refused 50 items \(\d+ bytes\): namespace team-a holds \d+ bytes/)
})

test('a report body over the limit is refused before it is read, and the hooks see a ResourceLimit refusal', LIMIT, async (t) => {
  let called = 0
  const exporter = { reportTarget: async () => { called++; return { accepted: true } } } as unknown as ExporterClient
  const client = await serve(t, exporter, 64 * 1024)
  const big = report(T1, itemsOf(T1, 200))
  const bytes = Buffer.byteLength(JSON.stringify(big))
  assert.ok(bytes > 64 * 1024)
  assert.deepEqual(await client.reportTarget(big), {
    accepted: false,
    reason: 'ResourceLimit',
    message: `the exporter refused a report of 200 items (${bytes} bytes of JSON): request body is larger than the limit of 65536 bytes; split the target or trim the profile`,
  })
  assert.equal(called, 0)
  // Other routes keep their own limit, and a report under the limit goes through.
  assert.deepEqual(await client.reportTarget(report(T1, itemsOf(T1, 2))), { accepted: true })
  assert.equal(called, 1)
})

test('the client sends one report at a time, so the exporter parses one report body at once', LIMIT, async (t) => {
  let inFlight = 0
  let most = 0
  const exporter = {
    reportTarget: async (r: TargetReport): Promise<ReportResult> => {
      most = Math.max(most, ++inFlight)
      await new Promise((resolve) => setTimeout(resolve, 20))
      inFlight--
      return r.target.name === 'fail' ? { accepted: false, reason: 'ResourceLimit', message: 'no' } : { accepted: true }
    },
  } as unknown as ExporterClient
  const client = await serve(t, exporter, 1024 * 1024)
  const results = await Promise.all([T1, { namespace: 'team-a', name: 'fail' }, T2, T1].map((target) => client.reportTarget(report(target, itemsOf(target, 3)))))
  assert.equal(most, 1)
  assert.deepEqual(results.map((r) => r.accepted), [true, false, true, true])
})

test('a pending change and the time until it is due cross the API, so a split hooks container asks for its resync too', LIMIT, async (t) => {
  const h = harness(t)
  const client = await serve(t, h.exporter, reportBodyLimit(1_000_000))
  await client.reportTarget(report(T1, itemsOf(T1, 2)))
  const state = await client.applyInventory(composition({ debounceMs: 10_000 }))
  assert.equal(state.pending, true)
  assert.equal(state.nextChangeInMs, 10_000)
  assert.deepEqual(state, await h.exporter.applyInventory(composition({ debounceMs: 10_000 })))
})

test('a Stale drop and a count of stale items cross the API as they left the exporter', LIMIT, async (t) => {
  const h = harness(t)
  const client = await serve(t, h.exporter, reportBodyLimit(1_000_000))
  const [a] = itemsOf(T1, 1)
  assert.ok(a)
  const held = { ...report(T1, [a], [], 5), uid: 'u', sequence: 2000, itemGenerations: [7] }
  assert.deepEqual(await client.reportTarget(held), { accepted: true })
  assert.deepEqual(await client.reportTarget({ ...held, generation: 4, sequence: 3000 }), {
    accepted: false,
    reason: 'Stale',
    message: 'the exporter holds a report of generation 5; this one, of generation 4, was dropped as stale',
    heldGeneration: 5,
    heldChecksum: held.checksum,
  })
  assert.deepEqual(await client.reportTarget({ ...held, sequence: 4000, itemGenerations: [6] }), { accepted: true, staleItems: 1 })
})

/** An exporter that records the bodies it is handed and answers as an accepting one would. */
function recording(): { exporter: ExporterClient; calls: [string, unknown][] } {
  const calls: [string, unknown][] = []
  const state = { complete: true, missingTargets: [], itemCount: 0, checksum: '', sinks: [] }
  const exporter: ExporterClient = {
    reportTarget: async (r) => { calls.push(['reportTarget', r]); return { accepted: true } },
    removeTarget: async (r) => { calls.push(['removeTarget', r]) },
    applyInventory: async (c) => { calls.push(['applyInventory', c]); return state },
    finalizeInventory: async (c) => { calls.push(['finalizeInventory', c]); return { finalized: true, state } },
    checkSink: async (s) => { calls.push(['checkSink', s]); return { reachable: true, message: '' } },
    holdsReport: async (r) => { calls.push(['holdsReport', r]); return true },
  }
  return { exporter, calls }
}

test('each route refuses a body of the wrong shape with a 400 and its code, before the exporter sees it', LIMIT, async (t) => {
  const { exporter, calls } = recording()
  const url = await listen(t, exporter, reportBodyLimit(1_000_000))
  const good = report(T1, itemsOf(T1, 2))
  const [first] = good.items
  assert.ok(first)
  const cases: { reason: string; route: keyof typeof EXPORTER_ROUTES; body: unknown; says: RegExp }[] = [
    { reason: 'a generation sent as a string is not coerced', route: 'reportTarget', body: { ...good, generation: '1' }, says: /body\/generation must be integer/ },
    { reason: 'an item whose attributes are not an object', route: 'reportTarget', body: { ...good, items: [{ ...first, attributes: 'x' }] }, says: /body\/items\/0\/attributes must be object/ },
    { reason: 'a report without failedKeys', route: 'reportTarget', body: { ...good, failedKeys: undefined }, says: /must have required property 'failedKeys'/ },
    { reason: 'a removed target whose name is a number', route: 'removeTarget', body: { namespace: 'team-a', name: 7 }, says: /body\/name must be string/ },
    { reason: 'a removed target whose uid is not a string', route: 'removeTarget', body: { ...T1, uid: 1 }, says: /body\/uid must be string/ },
    { reason: 'a debounce sent as a duration, not milliseconds', route: 'applyInventory', body: composition({ debounceMs: '10s' as unknown as number }), says: /body\/debounceMs must be number/ },
    { reason: 'a sink type the KollectSink CRD does not allow', route: 'applyInventory', body: composition({ sinks: [resolvedSink('primary', { type: 'ftp' as 'file' })] }), says: /body\/sinks\/0\/spec\/type must be equal to one of the allowed values/ },
    { reason: 'targets that are not a list', route: 'finalizeInventory', body: { ...composition(), targets: T1 }, says: /body\/targets must be array/ },
    { reason: 'a sink spec without its type, which the CRD requires', route: 'checkSink', body: { ...T1, spec: { file: { path: 'x' } } }, says: /body\/spec must have required property 'type'/ },
    { reason: 'a held-report check without its checksum', route: 'holdsReport', body: { target: T1, generation: 1 }, says: /must have required property 'checksum'/ },
    { reason: 'a deletion policy the CRD does not know', route: 'checkSink', body: resolvedSink('primary', { deletionPolicy: 'Keep' as 'Retain' }), says: /body\/spec\/deletionPolicy must be equal to one of the allowed values/ },
  ]
  for (const c of cases) {
    const res = await fetch(url + EXPORTER_ROUTES[c.route], { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${AUTH.token}` }, body: JSON.stringify(c.body) })
    const body = (await res.json()) as { code: string; message: string }
    assert.equal(res.status, 400, c.reason)
    assert.equal(body.code, 'KOLLECT_ERR_EXPORTER_BAD_REQUEST', c.reason)
    assert.match(body.message, c.says, c.reason)
  }
  assert.deepEqual(calls, [])
})

test('bodies of the shapes the hooks send reach the exporter as sent: nothing coerced, removed or defaulted', LIMIT, async (t) => {
  const { exporter, calls } = recording()
  const client = await serve(t, exporter, reportBodyLimit(1_000_000))
  const [a, b] = itemsOf(T1, 2)
  assert.ok(a && b)
  // A newer hooks container may send a field this exporter does not know yet.
  const sent = { ...report(T1, [a, b], ['apps/v1/Deployment/team-a/gone'], 3), uid: 'u1', sequence: 1_700_000_000_000_123, itemHashes: ['h1', 'h2'], itemGenerations: [4, null], extra: true }
  const sink = resolvedSink('git-demo', { type: 'git', git: { url: 'https://git.example.com/inv.git' } })
  const composed = composition({ sinks: [sink], useDefaultSink: false })
  await client.reportTarget(sent)
  await client.removeTarget({ ...T1, uid: 'u1' })
  await client.removeTarget(T2)
  await client.applyInventory(composed)
  await client.finalizeInventory(composition({ sinks: [], targets: [], generation: 0, suspend: true }))
  await client.checkSink(sink)
  assert.equal(await client.holdsReport({ target: T1, uid: 'u1', generation: 3, checksum: sent.checksum }), true)
  assert.deepEqual(calls, [
    ['reportTarget', sent],
    ['removeTarget', { ...T1, uid: 'u1' }],
    ['removeTarget', T2],
    ['applyInventory', composed],
    ['finalizeInventory', composition({ sinks: [], targets: [], generation: 0, suspend: true })],
    ['checkSink', sink],
    ['holdsReport', { target: T1, uid: 'u1', generation: 3, checksum: sent.checksum }],
  ])
})
