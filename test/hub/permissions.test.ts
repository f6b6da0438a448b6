import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { jetstream, jetstreamManager } from '@nats-io/jetstream'
import { connect } from '@nats-io/transport-node'
import { parseHubConfig } from '../../hub/config.js'
import { Hub } from '../../hub/hub.js'
import { createHubMetrics } from '../../hub/metrics.js'
import { createNatsSink } from '../../sinks/nats/index.js'
import { createBareRemote, gitLog } from '../support/git.js'
import { makeItems, snapshotOf } from '../support/items.js'
import { startNats } from '../support/nats.js'
import { pollUntil } from '../support/process.js'
import { cleanups, type Later } from '../support/cleanups.js'

// The nats-server permissions docs/operations.md#hub-mode gives a spoke and the hub: a spoke
// exports under its own cluster's subjects and is refused under another's; the hub consumes
// and acknowledges through its durable consumer and cannot publish as any spoke.
const CONF = `authorization {
  users = [
    { user: east, password: east-pass, permissions: {
        publish: { allow: ["kollect.east.>", "$JS.API.>", "$KV.KOLLECT_STATE.>"] }
        subscribe: { allow: ["_INBOX.>"] } } }
    { user: hub, password: hub-pass, permissions: {
        publish: { allow: ["$JS.API.>", "$JS.ACK.KOLLECT.kollect-hub.>"] }
        subscribe: { allow: ["_INBOX.>"] } } }
  ]
}
`

async function natsWithDocumentedUsers(t: Later): Promise<{ url: string; dir: string }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kollect-hub-perm-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(path.join(dir, 'nats.conf'), CONF)
  const nats = await startNats({ args: ['-c', path.join(dir, 'nats.conf')] })
  t.after(() => nats.destroy())
  return { url: nats.url, dir }
}

/** The east spoke's first export of team-a/fleet, through its NATS sink as the east user. */
async function eastExports(t: Later, url: string, dir: string, items = 3): Promise<void> {
  const sink = createNatsSink({ id: 'platform/events', spec: { type: 'nats', cluster: 'east', nats: { url } }, credentials: { username: 'east', password: 'east-pass' }, dataDir: dir })
  t.after(() => sink.close())
  const written = await sink.write(snapshotOf({ namespace: 'team-a', name: 'fleet' }, makeItems(items), 'east'))
  assert.deepEqual(written, { added: items, changed: 0, removed: 0 })
}

test('a spoke user bound to its prefix exports its own cluster and cannot publish as another', { timeout: 60_000 }, async (test) => {
  const t = cleanups(test)
  const { url, dir } = await natsWithDocumentedUsers(t)
  await eastExports(t, url, dir)

  const nc = await connect({ servers: url, user: 'east', pass: 'east-pass' })
  t.after(() => nc.close())
  const js = jetstream(nc, { timeout: 2_000 })
  await assert.rejects(js.publish('kollect.west.team-a.fleet.added', '{}'), /permissions violation/i)
  // The same user's own prefix is accepted, so the refusal is the permission, not the connection.
  assert.ok((await js.publish('kollect.east.team-a.fleet.added', '{}')).seq > 0)
})

test('the hub user consumes and acknowledges through its durable consumer, and cannot publish as a spoke', { timeout: 90_000 }, async (test) => {
  const t = cleanups(test)
  const { url, dir } = await natsWithDocumentedUsers(t)
  await eastExports(t, url, dir)

  // The hub with its documented user's credentials as a mounted Secret (secretDir).
  const secretDir = path.join(dir, 'hub-nats')
  mkdirSync(secretDir)
  writeFileSync(path.join(secretDir, 'username'), 'hub')
  writeFileSync(path.join(secretDir, 'password'), 'hub-pass\n')
  const remote = await createBareRemote(dir)
  const hub = new Hub({
    config: parseHubConfig(JSON.stringify({
      nats: { url, secretDir },
      clusters: ['east'],
      dataDir: path.join(dir, 'hub-data'),
      sinks: [{ name: 'fleet-git', spec: { type: 'git', git: { url: remote, branch: 'main' } } }],
    })),
    metrics: createHubMetrics(),
    log: () => undefined,
    backoff: { minMs: 50, maxMs: 500, factor: 2 },
  })
  t.after(() => hub.stop())
  await hub.start()

  // Consumed, exported and acknowledged: nothing pending, nothing waiting for an ack, one commit.
  const nc = await connect({ servers: url, user: 'hub', pass: 'hub-pass' })
  t.after(() => nc.close())
  const jsm = await jetstreamManager(nc)
  const stream = await jsm.streams.info('KOLLECT')
  await pollUntil('the hub acknowledged the stream', async () => {
    const info = await jsm.consumers.info('KOLLECT', 'kollect-hub')
    return info.num_pending === 0 && info.num_ack_pending === 0 && info.ack_floor.stream_seq === stream.state.last_seq
  }, { timeoutMs: 30_000 })
  assert.deepEqual((await gitLog(remote, 'main')).filter((c) => c.trailers['Kollect-Cluster']).map((c) => c.trailers['Kollect-Cluster']), ['east'])

  // The hub's credentials cannot write change events, for a listed cluster or another.
  const js = jetstream(nc, { timeout: 2_000 })
  await assert.rejects(js.publish('kollect.east.team-a.fleet.added', '{}'), /permissions violation/i)
  await assert.rejects(js.publish('kollect.west.team-a.fleet.snapshot', '{}'), /permissions violation/i)
  assert.equal((await jsm.streams.info('KOLLECT')).state.last_seq, stream.state.last_seq, 'nothing reached the stream')
})
