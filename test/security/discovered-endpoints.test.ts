import assert from 'node:assert/strict'
import { after, describe, test } from 'node:test'
import { checkResolvedEndpoint } from '../../server/guards/ssrf.js'
import { createSinkFactory } from '../../sinks/registry.js'
import { SinkError, type Sink } from '../../sinks/sink.js'
import { countingListener, fakeKafkaBroker, nonLoopbackIPv4, NATS, type Peer } from '../support/hostile-peers.js'
import { makeItems, snapshotOf } from '../support/items.js'
import { createServer } from 'node:http'
import net from 'node:net'

// Addresses a sink learns at run time pass the SSRF guard too, with private sinks off: the
// brokers a Kafka cluster advertises in any metadata answer, not only the first, the servers
// a NATS server gossips in its INFO (connect_urls), and where an S3 server redirects to. The sink is built as the exporter builds it
// (the registry, the guard after DNS); its configured endpoint is on this machine's non-loopback
// address, which the guard allows, and what it learns points at a loopback listener, which must
// never see a connection.

const factory = createSinkFactory({
  dataDir: '/nonexistent',
  // Only the s3 sink here has a secretRef.
  credentials: async () => ({ accessKeyId: 'AKIAKOLLECT', secretAccessKey: 'not-a-real-key' }),
  checkEndpoint: (url) => checkResolvedEndpoint(url, false),
})
const INVENTORY = { namespace: 'team-a', name: 'shop' }

const closers: { close(): Promise<void> }[] = []
after(async () => {
  for (const c of closers.reverse()) await c.close().catch(() => undefined)
})

/** The action's outcome, once it settles or `reached` has a connection, whichever comes first (null: it succeeded). */
async function untilSettledOrReached(action: Promise<unknown>, reached: Peer, timeoutMs = 60_000): Promise<unknown> {
  let outcome: { err: unknown } | undefined
  const settled = action.then(() => (outcome = { err: null }), (err: unknown) => (outcome = { err }))
  const deadline = Date.now() + timeoutMs
  while (outcome === undefined && reached.connections() === 0 && Date.now() < deadline) {
    await Promise.race([settled, new Promise((r) => setTimeout(r, 20))])
  }
  assert.equal(reached.connections(), 0, 'a connection reached the loopback listener')
  assert.ok(outcome, `the action neither ended nor reached the listener in ${timeoutMs} ms`)
  return outcome.err
}

describe('Kafka: every broker the cluster advertises is guarded when the client connects', () => {
  test('a later metadata answer that advertises a loopback broker gets no connection, and the write fails naming it', async () => {
    const ip = nonLoopbackIPv4()
    const trap = await countingListener()
    closers.push(trap)
    const broker = await fakeKafkaBroker(ip, { host: '127.0.0.1', port: trap.port }, ['kollect', 'kollect.kollect-state'])
    closers.push(broker)
    const sink: Sink = await factory({ ...INVENTORY, name: 'events', spec: { type: 'kafka', kafka: { brokers: `${ip}:${broker.port}` } } })
    closers.push(sink)
    const err = await untilSettledOrReached(sink.write(snapshotOf(INVENTORY, makeItems(1))), trap)
    assert.ok(broker.metadataAnswers() >= 2, 'the loopback broker came in a later metadata answer')
    assert.ok(err instanceof SinkError, String(err))
    assert.equal(err.retriable, false, 'a refused broker is a permanent error')
    assert.match(err.message, new RegExp(`broker 127\\.0\\.0\\.1:${trap.port} advertised by the cluster: host 127\\.0\\.0\\.1 is a loopback address \\(private sinks are disabled\\)`))
  })
})

describe('NATS: servers a server gossips are not followed', () => {
  test('connect_urls naming a loopback server get no connection when the first server goes away', async () => {
    const ip = nonLoopbackIPv4()
    const trap = await countingListener()
    closers.push(trap)
    // The first connection completes the handshake, with INFO gossiping the loopback server, and
    // is dropped a moment later; every later one is reset at once. A client that follows the
    // gossip reconnects to the loopback server.
    const info = JSON.parse(NATS.greeting?.toString().slice('INFO '.length) ?? '{}') as Record<string, unknown>
    let accepted = 0
    const server = net.createServer((socket) => {
      socket.on('error', () => undefined)
      if (accepted++ > 0) return void socket.resetAndDestroy()
      socket.write(`INFO ${JSON.stringify({ ...info, connect_urls: [`127.0.0.1:${trap.port}`] })}\r\n`)
      socket.on('data', (chunk) => {
        if (/PING\r\n/.test(chunk.toString())) {
          socket.write('PONG\r\n')
          setTimeout(() => socket.resetAndDestroy(), 200)
        }
      })
    })
    await new Promise<void>((resolve) => server.listen({ host: ip, port: 0 }, resolve))
    closers.push({ close: () => new Promise((resolve) => server.close(() => resolve())) })
    const port = (server.address() as net.AddressInfo).port
    const sink: Sink = await factory({ ...INVENTORY, name: 'nats', spec: { type: 'nats', nats: { url: `nats://${ip}:${port}` } } })
    closers.push(sink)
    const err = await untilSettledOrReached(sink.healthcheck(), trap)
    assert.ok(accepted >= 1, 'the client reached the first server')
    assert.ok(err instanceof SinkError, String(err))
  })
})

describe('S3: a redirect is not followed', () => {
  for (const status of [301, 302, 307, 308]) {
    test(`an HTTP ${status} to a loopback address (Location, S3's Endpoint and a bucket region) gets no connection`, async () => {
      const ip = nonLoopbackIPv4()
      const trap = await countingListener()
      closers.push(trap)
      let requests = 0
      const server = createServer((req, res) => {
        requests++
        req.resume()
        const code = status === 301 ? 'PermanentRedirect' : 'TemporaryRedirect'
        res.writeHead(status, { Location: `http://127.0.0.1:${trap.port}${req.url ?? '/'}`, 'x-amz-bucket-region': 'us-west-2', 'Content-Type': 'application/xml' })
        res.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>elsewhere</Message><Endpoint>127.0.0.1:${trap.port}</Endpoint><Bucket>inventory</Bucket></Error>`)
      })
      await new Promise<void>((resolve) => server.listen({ host: ip, port: 0 }, resolve))
      closers.push({ close: () => new Promise((resolve) => server.close(() => resolve())) })
      const port = (server.address() as net.AddressInfo).port
      const sink: Sink = await factory({ ...INVENTORY, name: `s3-${status}`, spec: { type: 's3', secretRef: { name: 'keys' }, s3: { bucket: 'inventory', endpoint: `http://${ip}:${port}`, pathStyle: true } } })
      closers.push(sink)
      const err = await untilSettledOrReached(sink.healthcheck(), trap)
      assert.ok(requests >= 1, 'the client reached the server')
      assert.ok(err instanceof SinkError, String(err))
    })
  }
})
