// Leader election's fencing as each store keeps it, against the real servers: a writer's token is
// recorded where the store can hold it, an older epoch of the same Lease is refused, and a fence
// that fails at the sink's commit point leaves the store as it was. Each "pod" writes through a
// sink instance of its own (clients, caches, clone), as another exporter would.
import assert from 'node:assert/strict'
import path from 'node:path'
import { after, before, describe, test, type TestContext } from 'node:test'
import { itemHash, itemKey } from '../../api/canonical.js'
import type { Item, KollectSinkSpec, ObjectRef, Snapshot } from '../../api/types.js'
import { renderItem, renderSnapshot } from '../../sinks/document.js'
import { FencedError, NO_FENCE, type FencingToken, type WriteFence } from '../../sinks/fence.js'
import { createGitSink } from '../../sinks/git/index.js'
import type { ItemEvent, SnapshotMarker } from '../../sinks/events.js'
import { kafkaSettings } from '../../sinks/kafka/config.js'
import { partitionFor } from '../../sinks/kafka/encode.js'
import { createKafkaSink } from '../../sinks/kafka/index.js'
import { KafkaService } from '../../sinks/kafka/service.js'
import { natsSettings } from '../../sinks/nats/config.js'
import { subjectFor } from '../../sinks/nats/encode.js'
import { createNatsSink } from '../../sinks/nats/index.js'
import { NatsService } from '../../sinks/nats/service.js'
import { decodeState, inventoryStateFilter, inventoryToken, replay, snapshotStateKey } from '../../sinks/nats/state.js'
import { createPostgresSink } from '../../sinks/postgres/index.js'
import { itemObjectKey, parsePointer } from '../../sinks/s3/encode.js'
import { createS3Sink } from '../../sinks/s3/index.js'
import { marksDir } from '../../sinks/s3/marks.js'
import type { Sink } from '../../sinks/sink.js'
import { rejection } from '../support/assertions.js'
import { createBareRemote, git, gitLog, gitSinkOptions, tempDir, withSink } from '../support/git.js'
import { bumpReplicas, makeItem, makeItems, snapshotOf } from '../support/items.js'
import { startKafka, type KafkaBroker } from '../support/kafka.js'
import { startNats, type NatsServer } from '../support/nats.js'
import { startPostgres, type PgServer } from '../support/postgres.js'
import { listKeys, readText, startS3, type S3Server } from '../support/s3.js'

const CLUSTER = 'lab-west'
const L3: FencingToken = { lease: 'L', epoch: 3 }

/** One fresh inventory on one store. */
interface Store {
  readonly inventory: ObjectRef
  /** A sink instance of its own, as another pod holds it; closed when the test ends. */
  sink(): Sink
  /** Everything the store holds for the inventory. */
  dump(): Promise<unknown>
  /** What a write that fails at `point` leaves exactly as it was. */
  unchangedAt(point: string): Promise<unknown>
  /** What such a write leaves behind on purpose, if anything. */
  abandoned?(): Promise<void>
  /** The store holds `snap`, recorded as written by `token` (undefined: without leader election). */
  holds(snap: Snapshot, token: FencingToken | undefined, why: string): Promise<void>
}

let inventories = 0
const freshInventory = (): ObjectRef => ({ namespace: 'team-a', name: `fence-${++inventories}` })

/** Version k: each changes one item, drops one and adds one, so every write has something to do. */
function version(inventory: ObjectRef, k: number): Snapshot {
  return snapshotOf(inventory, [bumpReplicas(makeItem(0), 10 + k), ...makeItems(4, k + 1)], CLUSTER)
}

/** A fence holding `token` whose check fails at `failAt`; `seen` collects the points it was asked at. */
function fence(token: FencingToken, failAt?: string, seen: string[] = []): WriteFence {
  return {
    token,
    check(point) {
      seen.push(point)
      if (point === failAt) throw new FencedError(`the lease was lost before ${point}`)
    },
  }
}

async function refused(write: Promise<unknown>): Promise<void> {
  const err = await rejection(write)
  assert.ok(err instanceof FencedError, `expected a FencedError, got ${err.name}: ${err.message}`)
}

/** Applying every event in order gives the last marker's items, and that marker is `snap`'s. */
function consumersHold(bodies: readonly (ItemEvent | SnapshotMarker)[], snap: Snapshot, why: string): void {
  const seen = replay(decodeState('', []), bodies.map((body, seq) => ({ seq, body })))
  assert.equal(seen.snapshot?.checksum, snap.checksum, `${why}: the last marker`)
  const byUid = (x: Item, y: Item): number => x.uid.localeCompare(y.uid)
  assert.deepEqual([...seen.items.values()].map((h) => h.item as Item).sort(byUid), [...snap.items].sort(byUid), `${why}: the events give the marker's items`)
}

/** The four rules, for a store that keeps the writer's token; `points` are its commit points. */
function fencingTests(open: (t: TestContext) => Promise<Store>, points: readonly string[]): void {
  test('1. an older epoch of the same Lease is refused, and the store still holds the later leader\'s export exactly', async (t) => {
    const s = await open(t)
    await s.sink().write(version(s.inventory, 1), fence(L3))
    await s.holds(version(s.inventory, 1), L3, 'epoch 3 wrote A')
    const before = await s.dump()
    await refused(s.sink().write(version(s.inventory, 2), fence({ lease: 'L', epoch: 2 })))
    assert.deepEqual(await s.dump(), before, 'the refused writer changed nothing')
  })

  test('2. the same Lease at an equal or a higher epoch writes, and so does another Lease at a lower one', async (t) => {
    const s = await open(t)
    await s.sink().write(version(s.inventory, 1), fence(L3))
    const next: [number, FencingToken][] = [[2, L3], [3, { lease: 'L', epoch: 4 }], [4, { lease: 'M', epoch: 0 }]]
    for (const [k, token] of next) {
      await s.sink().write(version(s.inventory, k), fence(token))
      await s.holds(version(s.inventory, k), token, `${token.lease}/${token.epoch} wrote version ${k}`)
    }
  })

  for (const point of points) {
    test(`3. a fence failing at "${point}" rejects the write and leaves the commit as it was; a write without the fence then lands`, async (t) => {
      const s = await open(t)
      const pod = s.sink()
      await pod.write(version(s.inventory, 1), fence(L3))
      const before = await s.unchangedAt(point)
      const seen: string[] = []
      await refused(pod.write(version(s.inventory, 2), fence(L3, point, seen)))
      assert.equal(seen.at(-1), point, 'the write reached that point and stopped there')
      assert.deepEqual(await s.unchangedAt(point), before)
      await s.abandoned?.()
      await pod.write(version(s.inventory, 2))
      await s.holds(version(s.inventory, 2), undefined, 'the same pod without a fence')
    })
  }

  test('4. without a fence (no leader election) a write after a fenced one lands and records no token', async (t) => {
    const s = await open(t)
    await s.sink().write(version(s.inventory, 1), fence(L3))
    await s.sink().write(version(s.inventory, 2))
    await s.holds(version(s.inventory, 2), undefined, 'no fence argument')
    await s.sink().write(version(s.inventory, 3), NO_FENCE)
    await s.holds(version(s.inventory, 3), undefined, 'NO_FENCE')
  })
}

describe('fencing, postgres sink (real PostgreSQL)', () => {
  let pg: PgServer
  before(async () => { pg = await startPostgres() })
  after(async () => { await pg?.destroy() })

  const where = 'WHERE cluster = $1 AND inventory_namespace = $2 AND inventory_name = $3'
  fencingTests(async (t) => {
    const inventory = freshInventory()
    const at = [CLUSTER, inventory.namespace, inventory.name]
    // Nothing is visible before COMMIT: every row is part of the commit.
    const dump = async () => ({
      items: await pg.query(`SELECT * FROM kollect_items ${where} ORDER BY uid`, at),
      snapshots: await pg.query(`SELECT * FROM kollect_items_snapshots ${where} ORDER BY id`, at),
    })
    return {
      inventory,
      sink: () => withSink(t, createPostgresSink({ id: 'team-a/pg', spec: { type: 'postgres', postgres: {} }, credentials: { dsn: pg.dsn }, dataDir: '/nonexistent' })),
      dump,
      unchangedAt: dump,
      async holds(snap, token, why) {
        const rows = await pg.query(`SELECT target_namespace, target_name, uid, content_hash FROM kollect_items ${where}`, at)
        assert.deepEqual(
          new Map(rows.map((r) => [`${r['target_namespace']}/${r['target_name']}/${r['uid']}`, r['content_hash']])),
          new Map(snap.items.map((i) => [itemKey(i), itemHash(i)])),
          `${why}: the rows`,
        )
        const [latest] = await pg.query(`SELECT checksum, item_count, lease, epoch FROM kollect_items_snapshots ${where} ORDER BY id DESC LIMIT 1`, at)
        const expected = { checksum: snap.checksum, item_count: snap.itemCount, lease: token?.lease ?? null, epoch: token ? String(token.epoch) : null }
        assert.deepEqual(latest, expected, `${why}: the latest snapshot row`)
      },
    }
  }, ['committing the transaction'])
})

describe('fencing, s3 sink (real versitygw server)', () => {
  let s3: S3Server
  before(async () => { s3 = await startS3() })
  after(async () => { await s3?.destroy() })

  for (const layout of ['document', 'perResource'] as const) {
    describe(`${layout} layout`, () => fencingTests(async (t) => {
      const inventory = freshInventory()
      const prefix = `${layout}/${CLUSTER}/${inventory.namespace}/${inventory.name}`
      const spec: KollectSinkSpec = { type: 's3', s3: { bucket: s3.bucket, endpoint: s3.endpoint, pathStyle: true, prefix: `${layout}/{cluster}/{namespace}/{name}`, layout } }
      const objects = async (under = '') =>
        new Map(await Promise.all((await listKeys(s3, `${prefix}/${under}`)).map(async (key) => [key, await readText(s3, key)] as const)))
      const pointer = () => readText(s3, `${prefix}/latest.json`)
      let pods = 0
      return {
        inventory,
        // Each pod its own writer name, so its marks are its own.
        sink: () => withSink(t, createS3Sink({ id: 'team-a/s3', spec, credentials: s3.credentials, dataDir: '/nonexistent' }, undefined, `pod-${++pods}`)),
        dump: () => objects(),
        // The pointer is the commit: objects written before it are named by no pointer.
        async unchangedAt() {
          const text = await pointer()
          const named = parsePointer(text)?.snapshot
          return { text, document: named && (await readText(s3, named)) }
        },
        ...(layout === 'perResource'
          ? { abandoned: async () => assert.equal((await listKeys(s3, marksDir(prefix))).length, 1, 'the writer\'s mark stays, so the next export compares every object') }
          : {}),
        async holds(snap, token, why) {
          const p = parsePointer(await pointer())
          assert.deepEqual([p?.checksum, p?.fencing], [snap.checksum, token], `${why}: the pointer`)
          if (layout === 'document') {
            assert.equal(await readText(s3, p?.snapshot ?? ''), renderSnapshot(snap), `${why}: the document the pointer names`)
            return
          }
          assert.deepEqual(await objects('items/'), new Map(snap.items.map((i) => [itemObjectKey(prefix, i), renderItem(i)])), `${why}: the item objects`)
          assert.deepEqual(await listKeys(s3, marksDir(prefix)), [], `${why}: no writer's mark left`)
        },
      }
    }, ['writing the latest pointer']))
  }
})

describe('fencing, nats sink (real nats-server with JetStream)', () => {
  let nats: NatsServer
  before(async () => { nats = await startNats() })
  after(async () => { await nats?.destroy() })

  const [stream, subject] = ['FENCE', 'fence']
  fencingTests(async (t) => {
    const inventory = freshInventory()
    const options = (id: string) => ({ id, spec: { type: 'nats', nats: { url: nats.url, stream, subject } } satisfies KollectSinkSpec, credentials: {}, dataDir: '/nonexistent' })
    const reader = new NatsService(natsSettings(options('test/reader')))
    t.after(() => reader.close())
    const at = { cluster: CLUSTER, inventory }
    const kvToken = inventoryToken(stream, subject, at)
    const messages = () => reader.readPublished(subjectFor(subject, at, '*'), 0)
    const entries = () => reader.readState(inventoryStateFilter(kvToken), snapshotStateKey(kvToken))
    const kv = async () => (await entries()).map((e) => ({ ...e, value: Buffer.from(e.value).toString() }))
    const record = async () => (await kv()).filter((e) => e.key === snapshotStateKey(kvToken))
    const dump = async () => ({ messages: await messages(), kv: await kv() })
    return {
      inventory,
      sink: () => withSink(t, createNatsSink(options('team-a/nats'))),
      dump,
      // Events may precede a failed marker check: consumers take an export at its marker.
      unchangedAt: async (point) =>
        point === 'publishing events' ? dump()
          : point === 'publishing the snapshot marker' ? { markers: (await messages()).filter((m) => m.body.type === 'snapshot'), record: await record() }
            : record(),
      async holds(snap, token, why) {
        const held = decodeState(kvToken, await entries()).snapshot
        assert.deepEqual([held?.checksum, held?.fencing], [snap.checksum, token], `${why}: the KV record`)
        consumersHold((await messages()).map((m) => m.body), snap, why)
      },
    }
  }, ['publishing events', 'publishing the snapshot marker', 'recording the published snapshot'])
})

describe('fencing, git sink (real bare remote)', () => {
  fencingTests(async (t) => {
    const root = await tempDir(t)
    const remote = await createBareRemote(root)
    const inventory = freshInventory()
    // Every ref of the remote, by commit id: its whole history.
    const refs = () => git(remote, 'for-each-ref')
    let pods = 0
    return {
      inventory,
      sink: () => withSink(t, createGitSink(gitSinkOptions(path.join(root, `pod-${++pods}`), { url: remote, branch: 'main' }))),
      dump: refs,
      unchangedAt: refs,
      async holds(snap, token, why) {
        const doc = await git(remote, 'show', `main:inventory/${CLUSTER}/${inventory.namespace}/${inventory.name}.json`)
        assert.equal(doc, renderSnapshot(snap), `${why}: the document`)
        const trailers = (await gitLog(remote, 'main'))[0]?.trailers ?? {}
        assert.deepEqual(
          [trailers['Kollect-Checksum'], trailers['Kollect-Lease'], trailers['Kollect-Epoch']],
          [snap.checksum, token?.lease, token && String(token.epoch)],
          `${why}: the tip's trailers`,
        )
      },
    }
  }, ['pushing'])
})

describe('fencing, kafka sink (real Apache Kafka broker, KRaft)', () => {
  let kafka: KafkaBroker
  before(async () => { kafka = await startKafka() })
  after(async () => { await kafka?.destroy() })

  test('3. a fence failing at the transaction\'s commit aborts it: read_committed consumers see nothing of it; a write without the fence then lands once', async (t) => {
    const inventory = freshInventory()
    const topic = 'fence'
    const options = (id: string) => ({ id, spec: { type: 'kafka', kafka: { brokers: kafka.bootstrap, topic, partitions: 1 } } satisfies KollectSinkSpec, credentials: {}, dataDir: '/nonexistent' })
    const committed = async () => {
      const reader = new KafkaService(kafkaSettings(options('test/reader')))
      try {
        const partition = partitionFor({ cluster: CLUSTER, inventory }, (await reader.topics()).partitions)
        await reader.settled(topic, partition)
        return await reader.readCommitted(topic, partition)
      } finally {
        await reader.close()
      }
    }
    const bodies = (records: Awaited<ReturnType<typeof committed>>) => records.map((r) => JSON.parse(r.value ?? 'null') as ItemEvent | SnapshotMarker)
    const pod = withSink(t, createKafkaSink(options('team-a/kafka')))
    const [a, b] = [version(inventory, 1), version(inventory, 2)]

    await pod.write(a, fence(L3))
    const before = await committed()
    consumersHold(bodies(before), a, 'epoch 3 wrote A')
    const seen: string[] = []
    await refused(pod.write(b, fence(L3, 'committing the transaction', seen)))
    assert.equal(seen.at(-1), 'committing the transaction', 'the write reached its commit and stopped there')
    assert.deepEqual(await committed(), before, 'the aborted transaction is invisible to read_committed consumers')

    await pod.write(b)
    const now = await committed()
    assert.deepEqual(now.slice(0, before.length), before)
    assert.deepEqual(bodies(now.slice(before.length)).map((m) => m.type).sort(), ['added', 'changed', 'removed', 'snapshot'], 'B\'s changes once, then its marker')
    consumersHold(bodies(now), b, 'the same pod without a fence wrote B')
  })
})
