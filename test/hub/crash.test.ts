import assert from 'node:assert/strict'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { jetstreamManager } from '@nats-io/jetstream'
import { connect } from '@nats-io/transport-node'
import type { ObjectRef } from '../../api/types.js'
import { inventoryKey } from '../../hub/fleet.js'
import { parseHubConfig } from '../../hub/config.js'
import { Hub } from '../../hub/hub.js'
import { createHubMetrics } from '../../hub/metrics.js'
import { escapePathSegment } from '../../sinks/escape.js'
import { createNatsSink } from '../../sinks/nats/index.js'
import { createBareRemote, gitLog, tempDir } from '../support/git.js'
import { bumpReplicas, makeItems, snapshotOf } from '../support/items.js'
import { startNats } from '../support/nats.js'
import { pollUntil } from '../support/process.js'
import { startPostgres } from '../support/postgres.js'

// A hub that dies after its Git and PostgreSQL sinks confirmed an export, before it acknowledged
// the messages: the next start gets them again (after ack_wait) and writes nothing twice.
//
// The crash is the hub's own failure path, with no seam: its save of the inventory (between the
// sinks and the ack) fails because a directory stands where the file goes, so handling the
// marker throws and consuming ends, as it does before main-hub exits; the restart finds the
// file as saved before the crash.

const INV: ObjectRef = { namespace: 'team-a', name: 'fleet' }
const N = 20
const ACK_WAIT_S = 3

test('a hub crash between the sinks confirming and the ack: redelivered, no duplicate commit or row', { timeout: 120_000 }, async (t) => {
  const cleanups: (() => Promise<unknown>)[] = []
  t.after(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined)
  })
  const [nats, pg] = await Promise.all([startNats(), startPostgres()])
  cleanups.push(() => nats.destroy(), () => pg.destroy())
  const root = await tempDir(t, 'kollect-hub-crash-')
  const remote = await createBareRemote(root)
  mkdirSync(path.join(root, 'pg-secret'))
  writeFileSync(path.join(root, 'pg-secret', 'dsn'), pg.dsn)
  const dataDir = path.join(root, 'hub-data')
  const config = parseHubConfig(JSON.stringify({
    nats: { url: nats.url, ackWaitSeconds: ACK_WAIT_S },
    clusters: ['east'],
    dataDir,
    sinks: [
      { name: 'fleet-git', spec: { type: 'git', git: { url: remote, branch: 'main' } } },
      { name: 'fleet-db', spec: { type: 'postgres' }, secretDir: path.join(root, 'pg-secret') },
    ],
  }))
  const startHub = async (): Promise<Hub> => {
    const hub = new Hub({ config, metrics: createHubMetrics(), log: () => undefined, backoff: { minMs: 50, maxMs: 500, factor: 2 } })
    cleanups.push(() => hub.stop())
    await hub.start()
    return hub
  }

  // The east spoke's exports, through its own NATS sink.
  const spoke = createNatsSink({ id: 'platform/events', spec: { type: 'nats', cluster: 'east', nats: { url: nats.url } }, credentials: {}, dataDir: path.join(root, 'east') })
  cleanups.push(() => spoke.close())
  let items = makeItems(N)
  await spoke.write(snapshotOf(INV, items, 'east'))

  const nc = await connect({ servers: nats.url })
  cleanups.push(() => nc.close())
  const jsm = await jetstreamManager(nc)
  const consumer = () => jsm.consumers.info('KOLLECT', 'kollect-hub')
  const caughtUp = () => pollUntil('hub caught up', async () => {
    const info = await consumer()
    return info.num_pending === 0 && info.num_ack_pending === 0
  }, { timeoutMs: 30_000 })
  const commits = async () => (await gitLog(remote, 'main')).filter((c) => c.trailers['Kollect-Cluster'])
  const snapshotRows = () => pg.query('SELECT checksum, changed FROM "public"."kollect_items_snapshots" WHERE cluster = $1 ORDER BY id', ['east'])
  const rowsWithReplicas = async (n: number) => Number((await pg.query(
    `SELECT count(*) AS n FROM "public"."kollect_items" WHERE cluster = 'east' AND attributes->>'replicas' = $1`, [String(n)]))[0]?.n)

  // First export through a healthy hub.
  let hub = await startHub()
  await caughtUp()
  assert.equal((await commits()).length, 1)
  await hub.stop()

  // The crash: a 1-item change reaches both sinks, then saving the inventory fails.
  hub = await startHub()
  // After the start read it: what a crash leaves is the inventory as saved before.
  const saved = path.join(dataDir, 'hub', `${escapePathSegment(inventoryKey('east', INV))}.json`)
  const before = readFileSync(saved, 'utf8')
  rmSync(saved)
  mkdirSync(path.join(saved, 'in-the-way'), { recursive: true })
  items = items.map((item, i) => (i === 7 ? bumpReplicas(item, 42) : item))
  await spoke.write(snapshotOf(INV, items, 'east'))
  await assert.rejects(hub.finished, /EISDIR|directory/i)
  const crashed = await snapshotRows()
  assert.deepEqual(crashed.map((r) => r.changed), [0, 1], 'PostgreSQL confirmed the change')
  assert.equal((await commits()).length, 2, 'Git confirmed the change')
  assert.equal(await rowsWithReplicas(42), 1)
  const unacked = await consumer()
  assert.ok(unacked.num_ack_pending >= 2, `the event and its marker are not acknowledged (${unacked.num_ack_pending})`)
  await hub.stop()

  // Restart: the messages come back after ack_wait, apply again, and the sinks already hold them.
  rmSync(saved, { recursive: true })
  writeFileSync(saved, before)
  hub = await startHub()
  await caughtUp()
  const after = await consumer()
  assert.ok(after.num_redelivered > 0 || after.delivered.consumer_seq > unacked.delivered.consumer_seq, 'the restarted hub got the messages again')
  assert.equal((await commits()).length, 2, 'no duplicate commit')
  assert.deepEqual(await snapshotRows(), crashed, 'no duplicate row')
  assert.equal(await rowsWithReplicas(42), 1)
  assert.equal(Number((await pg.query('SELECT count(*) AS n FROM "public"."kollect_items" WHERE cluster = $1', ['east']))[0]?.n), N)
  // The hub now holds the change: the next spoke change exports on top of it, once.
  items = items.map((item, i) => (i === 3 ? bumpReplicas(item, 43) : item))
  await spoke.write(snapshotOf(INV, items, 'east'))
  await caughtUp()
  assert.equal((await commits()).length, 3)
  assert.deepEqual((await snapshotRows()).map((r) => r.changed), [0, 1, 1])
})
