import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:net'
import { withSequence } from '../../../api/report.js'
import type { ExporterClient, ReportResult, TargetReport } from '../../../api/types.js'
import { httpExporterClient } from '../../../server/exporter-api/client.js'
import { EXPORTER_ROLE_HEADER, EXPORTER_ROUTES } from '../../../server/exporter-api/routes.js'
import { buildExporterApp } from '../../../server/exporter-api/server.js'
import { fanOutExporterClient, parsePeers, peerUrls } from '../../../server/exporter-api/peers.js'
import { createLogger } from '../../../server/process/logger.js'
import { createMetrics, type Metrics } from '../../../server/process/metrics.js'
import { composition, harness, itemsOf, LIMIT, report, resolvedSink, T1 } from './harness.js'

// KOLLECT_EXPORTER_PEERS: the state-carrying calls reach every exporter replica, the hooks answer
// with the active one's result, and a replica that is down fails no hook while one answers.

const AUTH = { mode: 'token', token: 'api-token' } as const

async function listen(t: TestContext, exporter: ExporterClient, ready: () => boolean): Promise<string> {
  const app = await buildExporterApp({
    exporter, ready, auth: AUTH, bodyLimit: 1024 * 1024, reportBodyLimit: 1024 * 1024, maxJsonDepth: 512,
    logger: createLogger('silent', 'test'), metrics: createMetrics('exporter'),
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => app.close())
  const address = app.server.address()
  return `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
}

/** A loopback URL nothing listens on: connections are refused. */
async function deadUrl(): Promise<string> {
  const server = createServer()
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const port = (server.address() as { port: number }).port
  await new Promise((r) => server.close(r))
  return `http://127.0.0.1:${port}`
}

function fanOut(urls: string[], metrics: Metrics, leader = urls[0]!) {
  return fanOutExporterClient({ leader: httpExporterClient(leader, AUTH), peers: async () => urls, auth: AUTH, logger: createLogger('silent', 'test'), metrics })
}

async function failures(metrics: Metrics): Promise<Record<string, number>> {
  const out: Record<string, number> = {}
  for (const v of (await metrics.exporterPeerFailures.get()).values) out[`${v.labels.call}/${v.labels.role}`] = v.value
  return out
}

test('every replica gets the state; the answer is the active one\'s; a standby runs no Delete', LIMIT, async (t) => {
  const active = harness(t)
  const standby = harness(t, { standby: true })
  const a = await listen(t, active.exporter, () => active.exporter.isActive)
  const s = await listen(t, standby.exporter, () => standby.exporter.isActive)
  const metrics = createMetrics('hooks')
  // The standby first: the active answer is chosen by its header, not by order.
  const client = fanOut([s, a], metrics, a)
  const comp = composition({ sinks: [resolvedSink('primary', { deletionPolicy: 'Delete' })] })
  const applied = await client.applyInventory(comp)
  assert.deepEqual(applied, await active.exporter.applyInventory(comp))
  assert.deepEqual(await client.reportTarget(report(T1, itemsOf(T1, 3))), { accepted: true })
  assert.equal(standby.exporter.inventoryState(comp.inventory)?.complete, true, 'the standby holds the report too')

  // The active finalizes (and deletes); the standby only forgets, and the hook sees the active's answer.
  active.clock.advance(60_000)
  await active.exporter.idle()
  const finalized = await client.finalizeInventory(comp)
  assert.equal(finalized.finalized, true)
  assert.equal(active.factory.sink('team-a/primary').removes.length, 1)
  assert.equal(standby.factory.sink('team-a/primary').removes.length, 0)
  assert.equal(standby.exporter.inventoryState(comp.inventory), null)
  assert.deepEqual(await failures(metrics), {})
})

test('a dead replica fails no call and is counted; with no active one any answer serves; all dead fails', LIMIT, async (t) => {
  const standby = harness(t, { standby: true })
  const s = await listen(t, standby.exporter, () => false)
  const dead = await deadUrl()
  const metrics = createMetrics('hooks')
  const client = fanOut([dead, s], metrics, s)
  assert.deepEqual(await client.reportTarget(report(T1, itemsOf(T1, 2))), { accepted: true }, 'mid-failover: the standby\'s answer')
  await client.removeTarget(T1)
  assert.deepEqual(await failures(metrics), { 'reportTarget/unknown': 1, 'removeTarget/unknown': 1 })
  await assert.rejects(fanOut([dead], metrics).reportTarget(report(T1, itemsOf(T1, 1))), /every exporter replica failed \(1\): .*fetch failed/)
})

test('a replica that answered once is counted under its role when it fails later', LIMIT, async (t) => {
  let up = true
  const exporter = { reportTarget: async (): Promise<ReportResult> => { if (!up) throw new Error('down'); return { accepted: true } } } as unknown as ExporterClient
  const s = await listen(t, exporter, () => false)
  const a = await listen(t, { reportTarget: async () => ({ accepted: true, staleItems: 2 }) } as unknown as ExporterClient, () => true)
  const metrics = createMetrics('hooks')
  const client = fanOut([s, a], metrics, a)
  assert.deepEqual(await client.reportTarget(report(T1, [])), { accepted: true, staleItems: 2 })
  up = false
  assert.deepEqual(await client.reportTarget(report(T1, [])), { accepted: true, staleItems: 2 })
  assert.deepEqual(await failures(metrics), { 'reportTarget/standby': 1 })
})

test('one report in flight per replica; checkSink goes to the leader only', LIMIT, async (t) => {
  const seen: Record<string, { inFlight: number; most: number; calls: number }> = {}
  const peer = (name: string, ms: number) => {
    const c = (seen[name] = { inFlight: 0, most: 0, calls: 0 })
    return {
      reportTarget: async (_r: TargetReport): Promise<ReportResult> => {
        c.inFlight++
        c.most = Math.max(c.most, c.inFlight)
        await new Promise((r) => setTimeout(r, ms))
        c.inFlight--
        return { accepted: true }
      },
      checkSink: async () => { c.calls++; return { ok: true } },
    } as unknown as ExporterClient
  }
  const a = await listen(t, peer('a', 20), () => true)
  const b = await listen(t, peer('b', 5), () => false)
  const client = fanOut([a, b], createMetrics('hooks'), a)
  await Promise.all(Array.from({ length: 6 }, () => client.reportTarget(report(T1, itemsOf(T1, 1)))))
  assert.deepEqual([seen['a']!.most, seen['b']!.most], [1, 1])
  await client.checkSink(resolvedSink('primary'))
  assert.deepEqual([seen['a']!.calls, seen['b']!.calls], [1, 0])
})

test('the exporter API says its role on every /v1 answer', LIMIT, async (t) => {
  let ready = false
  const url = await listen(t, { removeTarget: async () => undefined } as unknown as ExporterClient, () => ready)
  const call = () => fetch(url + EXPORTER_ROUTES.removeTarget, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer api-token' }, body: JSON.stringify(T1) })
  assert.equal((await call()).headers.get(EXPORTER_ROLE_HEADER), 'standby')
  ready = true
  assert.equal((await call()).headers.get(EXPORTER_ROLE_HEADER), 'active')
})

test('peers: host:port lists and names, resolved at most once per cache period, the last answer kept on a failed lookup', async () => {
  assert.deepEqual(parsePeers('127.0.0.1:8081, [::1]:9000,kollect-exporter-peers.ns.svc:8081'),
    [{ host: '127.0.0.1', port: 8081 }, { host: '::1', port: 9000 }, { host: 'kollect-exporter-peers.ns.svc', port: 8081 }])
  for (const bad of ['', ' , ', 'host', 'host:0', 'host:70000', 'http://host:1']) assert.throws(() => parsePeers(bad), /KOLLECT_EXPORTER_PEERS/, bad)
  let now = 0
  let answer: string[] | Error = ['10.0.0.1', '10.0.0.2']
  let lookups = 0
  const urls = peerUrls(parsePeers('peers:8081,[::1]:1'), 3000, async (host) => {
    lookups++
    if (host === '::1') return ['::1']
    if (answer instanceof Error) throw answer
    return answer
  }, () => now)
  const first = ['http://10.0.0.1:8081', 'http://10.0.0.2:8081', 'http://[::1]:1']
  assert.deepEqual(await urls(), first)
  answer = ['10.0.0.3']
  now = 2999
  assert.deepEqual(await urls(), first, 'cached')
  now = 3000
  assert.deepEqual(await urls(), ['http://10.0.0.3:8081', 'http://[::1]:1'], 'a new pod is seen after the cache period')
  answer = new Error('ENOTFOUND')
  now = 7000
  assert.deepEqual(await urls(), ['http://10.0.0.3:8081', 'http://[::1]:1'], 'a failed lookup keeps the last answer')
  assert.equal(lookups, 6)
})

test('a report serialised by the extraction child reaches every replica as it is, and each holds its items', LIMIT, async (t) => {
  const one = harness(t)
  const two = harness(t, { standby: true })
  const a = await listen(t, one.exporter, () => one.exporter.isActive)
  const b = await listen(t, two.exporter, () => two.exporter.isActive)
  const comp = composition({ sinks: [resolvedSink('primary')] })
  const client = fanOut([a, b], createMetrics('hooks'))
  await client.applyInventory(comp)
  // With the target's uid, reports are ordered by their stamp (see isStaleReport).
  const sent = { ...report(T1, itemsOf(T1, 3)), uid: 'uid-t1' }
  const json = withSequence(Buffer.from(JSON.stringify(sent)), 42)
  assert.deepEqual(await client.reportTarget({ target: sent.target, generation: sent.generation, itemCount: 3, json }), { accepted: true })
  for (const h of [one, two]) assert.equal(h.exporter.inventoryState(comp.inventory)?.complete, true)
  // And over the single-exporter client too.
  const single = httpExporterClient(a, AUTH)
  const stale = withSequence(Buffer.from(JSON.stringify(sent)), 41)
  const answer = await single.reportTarget({ target: sent.target, generation: sent.generation, itemCount: 3, json: stale })
  assert.equal(answer.accepted, false, 'the earlier stamp in the spliced JSON is read: the report is stale')
})

test('with peers, a report counts as held only when every replica holds it', LIMIT, async (t) => {
  const one = harness(t)
  const two = harness(t, { standby: true })
  const a = await listen(t, one.exporter, () => one.exporter.isActive)
  const b = await listen(t, two.exporter, () => two.exporter.isActive)
  const sent = { ...report(T1, itemsOf(T1, 2)), uid: 'uid-t1', sequence: 1 }
  const held = { target: T1, uid: 'uid-t1', generation: sent.generation, checksum: sent.checksum }
  await one.exporter.reportTarget(sent)
  const client = fanOut([a, b], createMetrics('hooks'))
  assert.equal(await client.holdsReport(held), false, 'the standby missed it')
  await two.exporter.reportTarget(sent)
  assert.equal(await client.holdsReport(held), true)
  assert.equal(await client.holdsReport({ ...held, checksum: 'other' }), false)
  assert.equal(await fanOut([a, await deadUrl()], createMetrics('hooks')).holdsReport(held), false, 'a replica that does not answer holds nothing')
})
