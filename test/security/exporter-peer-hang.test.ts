import assert from 'node:assert/strict'
import { createServer, type Server, type Socket } from 'node:net'
import { after, before, describe, test } from 'node:test'
import type { ExporterClient, ReportResult } from '../../api/types.js'
import { loadConfig } from '../../server/process/config.js'
import { httpExporterClient } from '../../server/exporter-api/client.js'
import { buildExporterApp } from '../../server/exporter-api/server.js'
import { DOWN_AFTER, fanOutExporterClient } from '../../server/exporter-api/peers.js'
import { buildHooksApp } from '../../server/http/hooks-app.js'
import { createPluralResolver } from '../../server/cluster/discovery.js'
import { createLogger } from '../../server/process/logger.js'
import { createMetrics, type Metrics } from '../../server/process/metrics.js'
import { pollUntil } from '../support/process.js'
import { report, T1 } from '../unit/exporter/harness.js'
import { conditionOf, ordinarySync, ROUTES, send } from './support.js'

// Issue 24, "also seen": with KOLLECT_EXPORTER_PEERS, one exporter pod that accepts connections
// and never answers held every target sync until the client timeout (8 s). The hook must answer
// once the active exporter has, and a peer that keeps hanging must be skipped for a while.

const AUTH = { mode: 'token', token: 'peer-token' } as const
const logger = createLogger('silent', 'test')

/** A listener that accepts every connection and never writes a byte; counts what it accepted. */
async function hangingPeer(): Promise<{ url: string; accepted: () => number; close(): Promise<void> }> {
  const sockets = new Set<Socket>()
  let accepted = 0
  const server: Server = createServer((socket) => {
    accepted++
    sockets.add(socket)
    socket.on('error', () => undefined)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address() as { port: number }
  return {
    url: `http://127.0.0.1:${port}`,
    accepted: () => accepted,
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise((r) => server.close(r))
    },
  }
}

/** A real exporter app that says it is active and answers reports with a mark of its own. */
async function activeExporter(): Promise<{ url: string; close(): Promise<void> }> {
  const exporter = { reportTarget: async (): Promise<ReportResult> => ({ accepted: true, staleItems: 2 }) } as unknown as ExporterClient
  const app = await buildExporterApp({
    exporter, ready: () => true, auth: AUTH, bodyLimit: 1024 * 1024, reportBodyLimit: 8 * 1024 * 1024, maxJsonDepth: 512, logger, metrics: createMetrics('exporter'),
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }
  return { url: `http://127.0.0.1:${port}`, close: () => app.close() }
}

async function failures(metrics: Metrics): Promise<number> {
  return (await metrics.exporterPeerFailures.get()).values.reduce((n, v) => n + v.value, 0)
}

describe('an exporter peer that accepts and never answers', () => {
  let hang: Awaited<ReturnType<typeof hangingPeer>>
  let active: Awaited<ReturnType<typeof activeExporter>>
  before(async () => {
    hang = await hangingPeer()
    active = await activeExporter()
  })
  after(async () => {
    await hang.close()
    await active.close()
  })

  test('a target sync answers with the active exporter\'s result well before the 8 s client timeout', async () => {
    const config = loadConfig({ PORT: '0', KOLLECT_HOOK_TOKEN: AUTH.token, KOLLECT_LOG_LEVEL: 'silent', KOLLECT_EXTRACT_WORKERS: '1', KOLLECT_EXTRACT_RESERVE: '0' }, { host: '127.0.0.1' })
    const metrics = createMetrics('hooks')
    // The hanging peer first: the answer must not wait for it, whatever the order.
    const exporter = fanOutExporterClient({ leader: httpExporterClient(active.url, AUTH), peers: async () => [hang.url, active.url], auth: AUTH, logger, metrics, timeoutMs: 8000 })
    const app = await buildHooksApp({ config, logger, metrics, exporter, resolvePlural: createPluralResolver(null) })
    try {
      await app.listen({ port: 0, host: '127.0.0.1' })
      const { port } = app.server.address() as { port: number }
      const started = performance.now()
      const res = await send(`http://127.0.0.1:${port}`, ROUTES.targetSync, { body: ordinarySync('team-a', 2), headers: { Authorization: `Bearer ${AUTH.token}` } })
      const ms = performance.now() - started
      assert.equal(res.status, 200, res.text)
      assert.ok(ms < 4000, `answered after ${ms.toFixed(0)} ms`)
      // staleItems: 2 is the active exporter's answer; the hanging peer gave none.
      assert.match(conditionOf(res, 'Degraded')?.message ?? '', /^2 objects were older/, res.text)
      assert.ok(hang.accepted() >= 1, 'the hanging peer was called too')
    } finally {
      await app.close()
    }
  })

  test(`after ${DOWN_AFTER} timeouts in a row it is skipped (a counted miss) until its backoff ends, then tried again`, async () => {
    let clock = 1_000_000
    const metrics = createMetrics('hooks')
    const client = fanOutExporterClient({ leader: httpExporterClient(active.url, AUTH), peers: async () => [hang.url, active.url], auth: AUTH, logger, metrics, timeoutMs: 1000, now: () => clock })
    for (let i = 0; i < DOWN_AFTER; i++) {
      assert.deepEqual(await client.reportTarget(report(T1, [])), { accepted: true, staleItems: 2 })
      await pollUntil(`timeout ${i + 1} of the hanging peer`, async () => (await failures(metrics)) === i + 1, { timeoutMs: 10_000 })
    }
    // Marked down: the next call does not reach it, and the miss is counted at once.
    const reached = hang.accepted()
    assert.deepEqual(await client.reportTarget(report(T1, [])), { accepted: true, staleItems: 2 })
    assert.equal(await failures(metrics), DOWN_AFTER + 1)
    assert.equal(hang.accepted(), reached, 'a peer marked down gets no call')
    // Past the first backoff (1 s) it is tried again.
    clock += 1001
    assert.deepEqual(await client.reportTarget(report(T1, [])), { accepted: true, staleItems: 2 })
    await pollUntil('the retry reaching the hanging peer', async () => (await failures(metrics)) === DOWN_AFTER + 2, { timeoutMs: 10_000 })
    assert.ok(hang.accepted() > reached, 'the retry connected to it')
  })
})
