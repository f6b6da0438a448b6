import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import type { ExporterClient, ReportResult, TargetReport } from '../../../api/types.js'
import { buildExporterApp, httpExporterClient, reportBodyLimit } from '../../../server/exporter-app.js'
import { createLogger } from '../../../server/logger.js'
import { createMetrics } from '../../../server/metrics.js'
import { composition, harness, itemsOf, LIMIT, report, T1, T2 } from './harness.js'

// The exporter's loopback API carries a refusal back to the hooks, refuses a report body larger
// than any namespace could hold before reading it, and gets one report at a time.

const AUTH = { mode: 'token', token: 'api-token' } as const

async function serve(t: TestContext, exporter: ExporterClient, reportLimit: number): Promise<ReturnType<typeof httpExporterClient>> {
  const app = await buildExporterApp({ exporter, auth: AUTH, bodyLimit: 1024 * 1024, reportBodyLimit: reportLimit, maxJsonDepth: 512, logger: createLogger('silent', 'test'), metrics: createMetrics('exporter') })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => app.close())
  const address = app.server.address()
  return httpExporterClient(`http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, AUTH)
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
