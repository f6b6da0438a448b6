import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, test } from 'node:test'
import { jetstream, jetstreamManager, StorageType, type JetStreamManager, type StreamInfo } from '@nats-io/jetstream'
import { Kvm } from '@nats-io/kv'
import { connect, nanos, type NatsConnection } from '@nats-io/transport-node'
import type { Item, KollectSinkSpec, ObjectRef, Snapshot } from '../../api/types.js'
import { STATE_BUCKET } from '../../sinks/nats/config.js'
import { createNatsSink } from '../../sinks/nats/index.js'
import { inventoryToken, snapshotStateKey } from '../../sinks/nats/state.js'
import { createPostgresSink } from '../../sinks/postgres/index.js'
import { SinkError, type Sink } from '../../sinks/sink.js'
import { bumpReplicas, makeItems, snapshotOf } from '../support/items.js'
import { startNats, type NatsServer } from '../support/nats.js'
import { startPostgres, type PgServer } from '../support/postgres.js'

// Retention against the real servers: old snapshot rows and stream events go, what the current
// state needs (the newest snapshot row, rows stamping current items, the KV bucket) stays.

const CLUSTER = 'lab-west'
let counter = 0

function freshInventory(): ObjectRef {
  counter += 1
  return { namespace: 'team-a', name: `ret-${counter}` }
}

/** Snapshots where each one after the first changes item 0 only, so the first still stamps the others. */
function history(inv: ObjectRef, exports: number, size = 5): Snapshot[] {
  const base = makeItems(size)
  return Array.from({ length: exports }, (_, k) => snapshotOf(inv, k === 0 ? base : [bumpReplicas(base[0] as Item, 100 + k), ...base.slice(1)]))
}

function isPermanent(pattern: RegExp): (err: unknown) => boolean {
  return (err) => err instanceof SinkError && !err.retriable && pattern.test(err.message)
}

describe('postgres snapshot retention (real PostgreSQL)', () => {
  let pg: PgServer
  const sinks: Sink[] = []

  before(async () => {
    pg = await startPostgres()
  })

  after(async () => {
    for (const sink of sinks) await sink.close().catch(() => undefined)
    await pg?.destroy()
  })

  function sink(postgres: NonNullable<KollectSinkSpec['postgres']>): Sink {
    const s = createPostgresSink({ id: 'platform/pg', spec: { type: 'postgres', postgres }, credentials: { dsn: pg.dsn }, dataDir: '/nonexistent' })
    sinks.push(s)
    return s
  }

  async function snapshotChecksums(inv: ObjectRef): Promise<string[]> {
    const rows = await pg.query<{ checksum: string }>(
      `SELECT checksum FROM "public"."kollect_items_snapshots" WHERE cluster = $1 AND inventory_namespace = $2 AND inventory_name = $3 ORDER BY id`,
      [CLUSTER, inv.namespace, inv.name],
    )
    return rows.map((r) => r.checksum)
  }

  async function itemCount(inv: ObjectRef): Promise<number> {
    const rows = await pg.query<{ n: string }>(
      `SELECT count(*) AS n FROM "public"."kollect_items" WHERE cluster = $1 AND inventory_namespace = $2 AND inventory_name = $3`,
      [CLUSTER, inv.namespace, inv.name],
    )
    return Number(rows[0]?.n)
  }

  test('keepSnapshots prunes rows beyond the newest N, keeps the rows stamping current items, and a restart still diffs right', async () => {
    const inv = freshInventory()
    const s = sink({ keepSnapshots: 3 })
    const snaps = history(inv, 6)
    for (const snap of snaps) await s.write(snap)
    const [first, , , fourth, fifth, sixth] = snaps.map((x) => x.checksum)
    const latest = snaps[5] as Snapshot
    // The 2nd and 3rd go; the 1st is older but last wrote items 1-4, which are current.
    assert.deepEqual(await snapshotChecksums(inv), [first, fourth, fifth, sixth])
    assert.equal(await itemCount(inv), 5, 'the current items are never pruned')

    // The pruned history does not look like drift: every current row is still stamped by its export.
    assert.ok(s.verify)
    assert.deepEqual(await s.verify(latest, 'report'), { differences: 0, examples: [], repaired: false })

    // A restarted exporter (a new sink) writes nothing for the unchanged snapshot, then exactly the change.
    const restarted = sink({ keepSnapshots: 3 })
    assert.deepEqual(await restarted.write(latest), { added: 0, changed: 0, removed: 0 })
    assert.deepEqual(await snapshotChecksums(inv), [first, fourth, fifth, sixth])
    const items = makeItems(5)
    const seventh = snapshotOf(inv, [bumpReplicas(items[0] as Item, 100 + 5), bumpReplicas(items[1] as Item, 7), ...items.slice(2)])
    assert.deepEqual(await restarted.write(seventh), { added: 0, changed: 1, removed: 0 })
    // The 4th goes now; the 1st still stamps items 2-4.
    assert.deepEqual(await snapshotChecksums(inv), [first, fifth, sixth, seventh.checksum])
  })

  test('keepSnapshots: 1 keeps exactly the newest row once no older export stamps a current item', async () => {
    const inv = freshInventory()
    const s = sink({ keepSnapshots: 1 })
    const a = snapshotOf(inv, makeItems(3))
    const b = snapshotOf(inv, makeItems(3).map((item, k) => bumpReplicas(item, 50 + k)))
    await s.write(a)
    await s.write(b)
    assert.deepEqual(await snapshotChecksums(inv), [b.checksum])
    assert.equal(await itemCount(inv), 3)
  })

  test('snapshotMaxAge prunes rows older than the age, never the newest one', async () => {
    const inv = freshInventory()
    const s = sink({ keepSnapshots: 0, snapshotMaxAge: '1s' })
    const snaps = history(inv, 3)
    await s.write(snaps[0] as Snapshot)
    await s.write(snaps[1] as Snapshot)
    // Nothing is older than a second yet.
    assert.deepEqual(await snapshotChecksums(inv), [snaps[0]?.checksum, snaps[1]?.checksum])
    await sleep(1500)
    // An unchanged snapshot writes nothing and prunes nothing: the newest row stays however old.
    assert.deepEqual(await s.write(snaps[1] as Snapshot), { added: 0, changed: 0, removed: 0 })
    assert.deepEqual(await snapshotChecksums(inv), [snaps[0]?.checksum, snaps[1]?.checksum])
    await s.write(snaps[2] as Snapshot)
    // The 2nd is old and stamps nothing current; the 1st is old but stamps items 1-4.
    assert.deepEqual(await snapshotChecksums(inv), [snaps[0]?.checksum, snaps[2]?.checksum])
  })

  test('keepSnapshots: 0 and no age keep every row', async () => {
    const inv = freshInventory()
    const s = sink({ keepSnapshots: 0 })
    const snaps = history(inv, 4)
    for (const snap of snaps) await s.write(snap)
    assert.deepEqual(await snapshotChecksums(inv), snaps.map((x) => x.checksum))
  })

  test('a bad retention setting is a permanent configuration error', () => {
    assert.throws(() => sink({ keepSnapshots: -1 }), isPermanent(/keepSnapshots/))
    assert.throws(() => sink({ keepSnapshots: 1.5 }), isPermanent(/keepSnapshots/))
    assert.throws(() => sink({ snapshotMaxAge: '3 days' }), isPermanent(/snapshotMaxAge/))
  })
})

describe('nats stream retention (real nats-server with JetStream)', () => {
  let nats: NatsServer
  let nc: NatsConnection
  let jsm: JetStreamManager
  const sinks: Sink[] = []
  const inv: ObjectRef = { namespace: 'team-a', name: 'prod' }

  before(async () => {
    nats = await startNats()
    nc = await connect({ servers: nats.url })
    jsm = await jetstreamManager(nc)
  })

  after(async () => {
    for (const sink of sinks) await sink.close().catch(() => undefined)
    await nc?.close().catch(() => undefined)
    await nats?.destroy()
  })

  function sink(stream: string, settings: { maxAge?: string; maxMessages?: number } = {}): Sink {
    const s = createNatsSink({
      id: 'platform/events',
      spec: { type: 'nats', nats: { url: nats.url, stream, subject: stream.toLowerCase(), ...settings } },
      credentials: {},
      dataDir: '/nonexistent',
    })
    sinks.push(s)
    return s
  }

  const info = (stream: string): Promise<StreamInfo> => jsm.streams.info(stream)

  /** The checksum the KV bucket records as published for `inv` on `stream`. */
  async function recorded(stream: string): Promise<string | undefined> {
    const kv = await new Kvm(jetstream(nc)).open(STATE_BUCKET)
    const entry = await kv.get(snapshotStateKey(inventoryToken(stream, stream.toLowerCase(), { cluster: CLUSTER, inventory: inv })))
    return entry?.operation === 'PUT' ? (entry.json<{ checksum: string }>()).checksum : undefined
  }

  test('a stream the sink creates gets the default age limit, and the KV bucket none', async () => {
    const s = sink('RDEFAULT')
    await s.write(snapshotOf(inv, makeItems(2)))
    const { config } = await info('RDEFAULT')
    assert.equal(config.max_age, nanos(168 * 3_600_000))
    assert.equal(config.max_msgs, -1)
    // The published state is what a restart and a consumer's current view need: never limited.
    const kvConfig = (await info(`KV_${STATE_BUCKET}`)).config
    assert.equal(kvConfig.max_age, 0)
    assert.equal(kvConfig.max_msgs, -1)
  })

  test('maxMessages drops the oldest events; a restart publishes nothing for the unchanged snapshot and exactly the change after it', async () => {
    const s = sink('RCOUNT', { maxMessages: 5 })
    const items = makeItems(4)
    const one = snapshotOf(inv, items)
    const changed = items.map((item, k) => (k < 3 ? bumpReplicas(item, 10 + k) : item))
    const two = snapshotOf(inv, changed)
    await s.write(one) // 4 events + marker
    await s.write(two) // 3 events + marker
    let state = (await info('RCOUNT')).state
    assert.equal(state.messages, 5)
    assert.equal(state.first_seq, 5, 'the first export\'s events are gone, its marker is the oldest left')
    assert.equal(await recorded('RCOUNT'), two.checksum)

    const restarted = sink('RCOUNT', { maxMessages: 5 })
    assert.deepEqual(await restarted.write(two), { added: 0, changed: 0, removed: 0 })
    assert.equal((await info('RCOUNT')).state.last_seq, state.last_seq, 'nothing published')
    const three = snapshotOf(inv, [...changed.slice(0, 3), bumpReplicas(items[3] as Item, 99)])
    assert.deepEqual(await restarted.write(three), { added: 0, changed: 1, removed: 0 })
    state = (await info('RCOUNT')).state
    assert.equal(state.last_seq, 11, 'one event and one marker')
    assert.equal(await recorded('RCOUNT'), three.checksum)
  })

  test('maxAge expires events; the KV state stays and a restart publishes nothing for the unchanged snapshot', async () => {
    const s = sink('RAGE', { maxAge: '5s' })
    const snap = snapshotOf(inv, makeItems(3))
    await s.write(snap)
    const created = await info('RAGE')
    assert.equal(created.config.max_age, nanos(5000))
    assert.equal(created.config.duplicate_window, nanos(5000), 'the duplicate window may not outlast max_age')
    assert.equal(created.state.messages, 4)
    // Expiry runs on the server's own timer: allow it well past the age on a loaded machine.
    const deadline = Date.now() + 30_000
    while ((await info('RAGE')).state.messages > 0) {
      assert.ok(Date.now() < deadline, 'events older than maxAge were not removed')
      await sleep(250)
    }
    assert.equal(await recorded('RAGE'), snap.checksum)
    const restarted = sink('RAGE', { maxAge: '5s' })
    assert.deepEqual(await restarted.write(snap), { added: 0, changed: 0, removed: 0 })
    assert.equal((await info('RAGE')).state.last_seq, 4, 'nothing published')
  })

  test('an existing stream keeps its limits unless the spec sets them', async () => {
    await jsm.streams.add({ name: 'ROPS', subjects: ['rops.>'], storage: StorageType.File, duplicate_window: nanos(120_000) })
    const snap = snapshotOf(inv, makeItems(1))
    await sink('ROPS').write(snap)
    assert.equal((await info('ROPS')).config.max_age, 0, 'a default never changes the operator\'s stream')
    await sink('ROPS', { maxAge: '10s', maxMessages: 1000 }).write(snap)
    const { config } = await info('ROPS')
    assert.equal(config.max_age, nanos(10_000))
    assert.equal(config.max_msgs, 1000)
    assert.equal(config.duplicate_window, nanos(10_000), 'lowered to fit max_age')
    await sink('ROPS', { maxAge: '0s' }).write(snap)
    assert.equal((await info('ROPS')).config.max_age, 0, '0s lifts the age limit')
  })

  test('a max age below the publish timeout is a permanent configuration error', () => {
    assert.throws(() => sink('RBAD', { maxAge: '1s' }), isPermanent(/maxAge/))
    assert.throws(() => sink('RBAD', { maxMessages: -1 }), isPermanent(/maxMessages/))
  })
})
