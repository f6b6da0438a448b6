import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { secretEnvName } from '../../server/cluster/credentials.js'
import { get } from '../support/hooks-server.js'
import { HTTP, KAFKA, NATS, POSTGRES, resettingPeer, type Peer, type Protocol, type ResetStep } from '../support/hostile-peers.js'
import { startKollectProcess, type KollectProcess } from '../support/kollect-process.js'
import { controllerFor, syncRequest } from '../support/metacontroller.js'
import { ROUTES, conditionOf, meta, send } from './support.js'

// No client library may crash the process. Each sink type's client meets a server that accepts
// and then resets the connection (TCP RST) at each step of its protocol: at once, after the
// client's first bytes, and after one plausible answer (mid-handshake: during SASL for Kafka,
// after the password request for PostgreSQL, after PONG for NATS, a response cut short for
// HTTP). The sink check goes through a real Kollect process, which must answer Unreachable with
// the reason and stay up.

interface Case {
  type: string
  protocol: Protocol
  /** The KollectSink spec for a peer on `port`. */
  spec(name: string, port: number): Record<string, unknown>
  /** The keys of its Secret (same name as the sink). */
  secret?(port: number): Record<string, string>
}

const CASES: Case[] = [
  {
    type: 'postgres',
    protocol: POSTGRES,
    spec: (name) => ({ type: 'postgres', cluster: 'lab', secretRef: { name } }),
    secret: (port) => ({ dsn: `postgres://kollect:pg-secret-pw@127.0.0.1:${port}/inventory` }),
  },
  { type: 'nats', protocol: NATS, spec: (_name, port) => ({ type: 'nats', cluster: 'lab', nats: { url: `nats://127.0.0.1:${port}` } }) },
  {
    // SASL: a reset during its handshake is what once killed the exporter ("Unhandled 'error' event").
    type: 'kafka',
    protocol: KAFKA,
    spec: (name, port) => ({ type: 'kafka', cluster: 'lab', secretRef: { name }, kafka: { brokers: `127.0.0.1:${port}`, saslMechanism: 'PLAIN' } }),
    secret: () => ({ username: 'kollect', password: 'kafka-secret-pw' }),
  },
  {
    type: 's3',
    protocol: HTTP,
    spec: (name, port) => ({ type: 's3', cluster: 'lab', secretRef: { name }, s3: { bucket: 'inventory', endpoint: `http://127.0.0.1:${port}`, pathStyle: true } }),
    secret: () => ({ accessKeyId: 'AKIAKOLLECT', secretAccessKey: 's3-secret-key' }),
  },
  { type: 'git', protocol: HTTP, spec: (_name, port) => ({ type: 'git', cluster: 'lab', git: { url: `http://127.0.0.1:${port}/org/inventory.git` } }) },
]

const STEPS: ResetStep[] = ['on connect', 'after the first bytes', 'mid-handshake']
const slug = (step: ResetStep) => step.replace(/[^a-z]+/g, '-')

describe('a peer that resets the connection at any step never crashes the process', () => {
  const peers = new Map<string, Peer>()
  let kollect: KollectProcess

  before(async () => {
    const env: Record<string, string> = { KOLLECT_ALLOW_PRIVATE_SINKS: 'true' }
    for (const c of CASES) {
      for (const step of STEPS) {
        const name = `${c.type}-${slug(step)}`
        const peer = await resettingPeer(step, c.protocol)
        peers.set(name, peer)
        for (const [key, value] of Object.entries(c.secret?.(peer.port) ?? {})) env[secretEnvName('team-a', name, key)] = value
      }
    }
    kollect = await startKollectProcess(env)
  })

  after(async () => {
    await kollect?.close()
    await Promise.all([...peers.values()].map((p) => p.close()))
  })

  for (const c of CASES) {
    for (const step of STEPS) {
      const name = `${c.type}-${slug(step)}`
      test(`${c.type}: reset ${step}`, async (t) => {
        const peer = peers.get(name) as Peer
        const sink = { ...meta('KollectSink', 'team-a', name), spec: c.spec(name, peer.port) }
        const res = await send(kollect.url, ROUTES.sinkSync, { body: JSON.stringify(syncRequest(controllerFor('kollect-sinks'), sink, {})) })
        assert.equal(res.status, 200, `${res.status} ${res.text}\n${kollect.proc.logTail()}`)
        assert.ok(peer.connections() >= 1, 'the client reached the peer')
        const reachable = conditionOf(res, 'Reachable')
        t.diagnostic(reachable?.message ?? '')
        assert.equal(`${reachable?.status} ${reachable?.reason}`, 'False Unreachable', JSON.stringify(reachable))
        // The sink's own failure, naming it; or, for a client that waits out its connect timeout
        // after a reset (NATS's, 5 s), the exporter's bound on a check (4 s).
        assert.match(reachable?.message ?? '', new RegExp(`^${c.type} sink team-a/${name}: [^:]+ failed: .+|^no answer within \\d+ ms$`))
        assert.doesNotMatch(reachable?.message ?? '', /secret-pw|secret-key/, 'no credential in the message')
        assert.equal(conditionOf(res, 'Ready')?.status, 'True', 'the configuration is valid')
        assert.equal(kollect.proc.hasExited(), false, `the process died:\n${kollect.proc.logTail()}`)
        assert.equal((await get(`${kollect.url}/healthz`)).status, 200)
      })
    }
  }

  test('the process is still the one that started, and answers', async () => {
    assert.equal(kollect.proc.hasExited(), false, kollect.proc.logTail())
    assert.equal((await get(`${kollect.url}/healthz`)).status, 200)
  })
})
