import assert from 'node:assert/strict'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream'
import { connect } from '@nats-io/transport-node'
import type { Item, ObjectRef, Snapshot } from '../../api/types.js'
import { parseHubConfig } from '../../hub/config.js'
import { inventoryKey } from '../../hub/fleet.js'
import { Hub } from '../../hub/hub.js'
import { createHubMetrics, type HubMetrics } from '../../hub/metrics.js'
import { escapePathSegment } from '../../sinks/escape.js'
import { createNatsSink } from '../../sinks/nats/index.js'
import type { Sink } from '../../sinks/sink.js'
import { createBareRemote, showFile, tempDir } from '../support/git.js'
import { bumpReplicas, makeItems, snapshotOf } from '../support/items.js'
import { startNats } from '../support/nats.js'
import { pollUntil } from '../support/process.js'
import { startPostgres } from '../support/postgres.js'

// Issue 25, goal 4: the hub reaches every spoke's latest marker by itself. A marker the held
// items do not give makes it read that inventory back from the stream, from its last good marker;
// a re-published copy of an older event does not count as newer for being later on the stream.

const INV: ObjectRef = { namespace: 'team-a', name: 'fleet' }
const N = 30

interface Bench {
  spoke: Sink
  jsm: JetStreamManager
  js: JetStreamClient
  dataDir: string
  startHub: () => Promise<{ hub: Hub; metrics: HubMetrics }>
  /** The hub acknowledged everything on the stream. */
  caughtUp: () => Promise<void>
  /** The checksum of the hub's Git document for the inventory. */
  exported: () => Promise<string>
  /** The hub's Git document for the inventory. */
  document: () => Promise<Snapshot>
  replicasRows: (n: number) => Promise<number>
}

async function bench(t: TestContext, ackWaitSeconds: number): Promise<Bench> {
  const cleanups: (() => Promise<unknown>)[] = []
  t.after(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined)
  })
  const [nats, pg] = await Promise.all([startNats(), startPostgres()])
  cleanups.push(() => nats.destroy(), () => pg.destroy())
  const root = await tempDir(t, 'kollect-hub-converge-')
  const remote = await createBareRemote(root)
  mkdirSync(path.join(root, 'pg-secret'))
  writeFileSync(path.join(root, 'pg-secret', 'dsn'), pg.dsn)
  const dataDir = path.join(root, 'hub-data')
  const document = async (): Promise<Snapshot> => JSON.parse(await showFile(remote, 'main', `inventory/east/${INV.namespace}/${INV.name}.json`)) as Snapshot
  const config = parseHubConfig(JSON.stringify({
    nats: { url: nats.url, ackWaitSeconds },
    clusters: ['east'],
    dataDir,
    sinks: [
      { name: 'fleet-git', spec: { type: 'git', git: { url: remote, branch: 'main' } } },
      { name: 'fleet-db', spec: { type: 'postgres' }, secretDir: path.join(root, 'pg-secret') },
    ],
  }))
  const spoke = createNatsSink({ id: 'platform/events', spec: { type: 'nats', cluster: 'east', nats: { url: nats.url } }, credentials: {}, dataDir: path.join(root, 'east') })
  cleanups.push(() => spoke.close())
  const nc = await connect({ servers: nats.url })
  cleanups.push(() => nc.close())
  const jsm = await jetstreamManager(nc)
  return {
    spoke,
    jsm,
    js: jetstream(nc),
    dataDir,
    startHub: async () => {
      const metrics = createHubMetrics()
      const hub = new Hub({ config, metrics, log: () => undefined, backoff: { minMs: 50, maxMs: 500, factor: 2 } })
      cleanups.push(() => hub.stop())
      await hub.start()
      return { hub, metrics }
    },
    caughtUp: () => pollUntil('hub caught up', async () => {
      const info = await jsm.consumers.info('KOLLECT', 'kollect-hub')
      return info.num_pending === 0 && info.num_ack_pending === 0
    }, { timeoutMs: 60_000 }),
    exported: async () => (await document()).checksum,
    document,
    replicasRows: async (n) => Number((await pg.query(`SELECT count(*) AS n FROM "public"."kollect_items" WHERE cluster = 'east' AND attributes->>'replicas' = $1`, [String(n)]))[0]?.n),
  }
}

const checksum = (items: Item[]): string => snapshotOf(INV, items, 'east').checksum

test('scenario 6: a re-published copy of an item\'s first event does not block the next marker', { timeout: 120_000 }, async (t) => {
  const b = await bench(t, 5)
  let items = makeItems(N)
  await b.spoke.write(snapshotOf(INV, items, 'east'))
  items = items.map((item, i) => (i === 0 ? bumpReplicas(item, 42) : item))
  await b.spoke.write(snapshotOf(INV, items, 'east'))
  const { metrics } = await b.startHub()
  await b.caughtUp()
  assert.equal(await b.exported(), checksum(items))

  // The first event of item 0 (its 'added', replicas 1), published again to its subject.
  const subject = 'kollect.east.team-a.fleet.added'
  const first = await b.jsm.streams.getMessage('KOLLECT', { seq: 1, next_by_subj: subject } as { seq: number })
  assert.ok(first)
  const copy = first.json<{ key: string; after: Item }>()
  assert.equal(copy.after.name, items[0]?.name)
  await b.js.publish(subject, first.data)

  // The spoke changes another item: its marker must be exported, with item 0 as the spoke has it.
  items = items.map((item, i) => (i === 3 ? bumpReplicas(item, 43) : item))
  await b.spoke.write(snapshotOf(INV, items, 'east'))
  await b.caughtUp()
  assert.equal(await b.exported(), checksum(items), 'the hub exported the spoke\'s latest marker')
  assert.equal(await b.replicasRows(42), 1)
  assert.equal(await b.replicasRows(43), 1)
  assert.equal((await metrics.incomplete.get()).values.reduce((sum, v) => sum + v.value, 0), 0, 'no marker failed its check')
})

test('scenario 5: a hub stopped mid-catch-up, restarted with newer messages before the redeliveries, converges with no spoke change', { timeout: 180_000 }, async (t) => {
  const ACK_WAIT_S = 20
  const b = await bench(t, ACK_WAIT_S)
  let items = makeItems(N)
  await b.spoke.write(snapshotOf(INV, items, 'east'))
  let { hub } = await b.startHub()
  await b.caughtUp()
  await hub.stop()

  // A backlog: the hub applies the first change's events and exports its marker, then dies
  // before it saved and acknowledged (its save fails: a directory stands where the file goes).
  ;({ hub } = await b.startHub())
  const saved = path.join(b.dataDir, 'hub', `${escapePathSegment(inventoryKey('east', INV))}.json`)
  const before = readFileSync(saved, 'utf8')
  rmSync(saved)
  mkdirSync(path.join(saved, 'in-the-way'), { recursive: true })
  items = items.map((item, i) => (i < N / 2 ? bumpReplicas(item, 42) : item))
  await b.spoke.write(snapshotOf(INV, items, 'east'))
  await assert.rejects(hub.finished, /EISDIR|directory/i)
  await hub.stop()
  const unacked = await b.jsm.consumers.info('KOLLECT', 'kollect-hub')
  assert.ok(unacked.num_ack_pending > N / 2, `the first change is delivered, not acknowledged (${unacked.num_ack_pending})`)

  // While it is down, the spoke changes again; the restart gets those messages first, and the
  // first change's only after ack_wait.
  rmSync(saved, { recursive: true })
  writeFileSync(saved, before)
  items = items.map((item, i) => (i >= N - 3 ? bumpReplicas(item, 43) : item))
  await b.spoke.write(snapshotOf(INV, items, 'east'))
  const { metrics } = await b.startHub()

  // No further spoke change: the hub reaches the latest marker by itself.
  await pollUntil('hub exported the latest marker to Git and PostgreSQL',
    async () => (await b.exported()) === checksum(items) && (await b.replicasRows(43)) === 3, { timeoutMs: (ACK_WAIT_S + 40) * 1000 })
  assert.equal(await b.replicasRows(42), N / 2)
  assert.equal(await b.replicasRows(43), 3)
  const rereads = (await metrics.rereads.get()).values.find((v) => v.labels.cluster === 'east')?.value ?? 0
  assert.ok(rereads > 0, 'the re-read is counted')
  assert.equal((await b.document()).spoke?.rereads, rereads, 'and shown in the hub\'s document')
  // The redeliveries, once they come, change nothing.
  await b.caughtUp()
  assert.equal(await b.exported(), checksum(items))
  assert.equal(await b.replicasRows(42), N / 2)
})
