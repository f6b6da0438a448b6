import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Consumer, FetchIsolationLevels } from '@platformatic/kafka'
import { itemKey } from '../../api/canonical.js'
import type { KollectSinkSpec, ObjectRef } from '../../api/types.js'
import { EMPTY_CHECKSUM, type ItemEvent, type SnapshotMarker } from '../../sinks/events.js'
import { kafkaSettings } from '../../sinks/kafka/config.js'
import {
  HEADER_CHECKSUM,
  HEADER_CLUSTER,
  HEADER_EVENT,
  HEADER_INVENTORY,
  inventoryKey,
  itemEventKey,
  partitionFor,
} from '../../sinks/kafka/encode.js'
import { createKafkaSink } from '../../sinks/kafka/index.js'
import type { ReadRecord } from '../../sinks/kafka/encode.js'
import { KafkaService } from '../../sinks/kafka/service.js'
import { SinkError, type Sink } from '../../sinks/sink.js'
import { startKafka, type KafkaBroker } from '../support/kafka.js'
import { pollUntil } from '../support/process.js'
import { bumpReplicas, makeItems, snapshotOf } from '../support/items.js'

const CLUSTER = 'lab-west'
const SINK_ID = 'platform/events'
const INVENTORY: ObjectRef = { namespace: 'team-a', name: 'shop' }

describe('kafka sink (real Apache Kafka broker, KRaft)', () => {
  let kafka: KafkaBroker
  const closers: { close(): Promise<void> }[] = []
  let topicCounter = 0

  before(async () => {
    kafka = await startKafka()
  })

  after(async () => {
    for (const c of closers) await c.close().catch(() => undefined)
    await kafka?.destroy()
  })

  function spec(topic: string, extra: Partial<NonNullable<KollectSinkSpec['kafka']>> = {}): KollectSinkSpec {
    return { type: 'kafka', kafka: { brokers: kafka.bootstrap, topic, partitions: 3, ...extra } }
  }

  /** A sink on a topic of its own, so each test counts only its own records. */
  function sink(topic = `kt${++topicCounter}`, opts: { spec?: KollectSinkSpec; credentials?: Record<string, string>; id?: string } = {}): Sink & { topic: string } {
    const s = createKafkaSink({ id: opts.id ?? SINK_ID, spec: opts.spec ?? spec(topic), credentials: opts.credentials ?? {}, dataDir: '/nonexistent' })
    closers.push(s)
    return Object.assign(s, { topic })
  }

  /** What a read_committed consumer of the inventory's partition sees. */
  async function published(topic: string): Promise<ReadRecord[]> {
    const reader = new KafkaService(kafkaSettings({ id: 'test/reader', spec: spec(topic), credentials: {}, dataDir: '/nonexistent' }))
    try {
      const { partitions } = await reader.topics()
      const partition = partitionFor({ cluster: CLUSTER, inventory: INVENTORY }, partitions)
      await reader.settled(topic, partition)
      return await reader.readCommitted(topic, partition)
    } finally {
      await reader.close()
    }
  }

  function bodies(records: readonly ReadRecord[]): (ItemEvent | SnapshotMarker)[] {
    return records.map((r) => JSON.parse(r.value ?? 'null') as ItemEvent | SnapshotMarker)
  }

  function eventsOf(records: readonly ReadRecord[]): string[] {
    return records.map((r) => r.headers[HEADER_EVENT] ?? '?')
  }

  test('a first export publishes one added event per item, keyed by identity, then the snapshot marker', async () => {
    const s = sink()
    const items = makeItems(5)
    const snap = snapshotOf(INVENTORY, items, CLUSTER)
    assert.deepEqual(await s.write(snap), { added: 5, changed: 0, removed: 0 })
    const records = await published(s.topic)
    assert.deepEqual(eventsOf(records), ['added', 'added', 'added', 'added', 'added', 'snapshot'])
    const at = { cluster: CLUSTER, inventory: INVENTORY }
    assert.deepEqual(records.slice(0, 5).map((r) => r.key).sort(), items.map((i) => itemEventKey(at, itemKey(i))).sort())
    assert.equal(records[5]?.key, inventoryKey(at))
    for (const r of records) {
      assert.equal(r.headers[HEADER_CHECKSUM], snap.checksum)
      assert.equal(r.headers[HEADER_CLUSTER], CLUSTER)
      assert.equal(r.headers[HEADER_INVENTORY], 'team-a/shop')
    }
    const marker = bodies(records)[5] as SnapshotMarker
    assert.deepEqual(
      { type: marker.type, checksum: marker.checksum, previousChecksum: marker.previousChecksum, itemCount: marker.itemCount, added: marker.added },
      { type: 'snapshot', checksum: snap.checksum, previousChecksum: null, itemCount: 5, added: 5 },
    )
    assert.deepEqual((bodies(records)[0] as ItemEvent).after !== undefined, true)
    // The same snapshot again publishes nothing.
    assert.deepEqual(await s.write(snap), { added: 0, changed: 0, removed: 0 })
    assert.equal((await published(s.topic)).length, 6)
  })

  test('a 1-item change publishes exactly one changed event with before and after, and the marker; a removal one removed event', async () => {
    const s = sink()
    const items = makeItems(50)
    await s.write(snapshotOf(INVENTORY, items, CLUSTER))
    const before = (await published(s.topic)).length
    const changed = [...items]
    changed[7] = bumpReplicas(items[7]!, 42)
    const second = snapshotOf(INVENTORY, changed, CLUSTER)
    assert.deepEqual(await s.write(second), { added: 0, changed: 1, removed: 0 })
    const after = (await published(s.topic)).slice(before)
    assert.deepEqual(eventsOf(after), ['changed', 'snapshot'])
    const event = bodies(after)[0] as ItemEvent
    assert.equal(event.before?.attributes.replicas, items[7]!.attributes.replicas)
    assert.equal(event.after?.attributes.replicas, 42)
    const marker = bodies(after)[1] as SnapshotMarker
    assert.equal(marker.previousChecksum, snapshotOf(INVENTORY, items, CLUSTER).checksum)
    assert.deepEqual([marker.added, marker.changed, marker.removed], [0, 1, 0])

    const removed = changed.filter((_, i) => i !== 3)
    assert.deepEqual(await s.write(snapshotOf(INVENTORY, removed, CLUSTER)), { added: 0, changed: 0, removed: 1 })
    const last = (await published(s.topic)).slice(before + 2)
    assert.deepEqual(eventsOf(last), ['removed', 'snapshot'])
    assert.equal((bodies(last)[0] as ItemEvent).before?.uid, items[3]!.uid)
  })

  test('a restarted exporter reads what was published from the state topic: no duplicates, only the new change', async () => {
    const topic = `kt${++topicCounter}`
    const items = makeItems(200)
    const first = sink(topic)
    await first.write(snapshotOf(INVENTORY, items, CLUSTER))
    await first.close()
    const count = (await published(topic)).length
    assert.equal(count, 201)

    const restarted = sink(topic)
    assert.deepEqual(await restarted.write(snapshotOf(INVENTORY, items, CLUSTER)), { added: 0, changed: 0, removed: 0 })
    assert.equal((await published(topic)).length, count, 'the same snapshot after a restart publishes nothing')
    const changed = [...items]
    changed[0] = bumpReplicas(items[0]!, 9)
    assert.deepEqual(await restarted.write(snapshotOf(INVENTORY, changed, CLUSTER)), { added: 0, changed: 1, removed: 0 })
    assert.deepEqual(eventsOf((await published(topic)).slice(count)), ['changed', 'snapshot'])
  })

  test('the broker restarted mid-export: the retried export commits once, with no loss and no duplicate', { timeout: 240_000 }, async () => {
    const s = sink()
    await s.write(snapshotOf(INVENTORY, makeItems(1, 100_000), CLUSTER))
    const base = await published(s.topic)
    const items = makeItems(5000)
    const snap = snapshotOf(INVENTORY, items, CLUSTER)
    const attempt = s.write(snap)
    // Kill the broker once the transaction has written part of its records (visible to a
    // read_uncommitted look at the log end), so the export is interrupted in the middle.
    const probe = new Consumer({ clientId: 'probe', groupId: 'probe', bootstrapBrokers: [kafka.bootstrap] })
    try {
      const partition = partitionFor({ cluster: CLUSTER, inventory: INVENTORY }, 3)
      await pollUntil('the export to be under way', async () => {
        const offsets = await probe.listOffsets({ topics: [s.topic], isolationLevel: FetchIsolationLevels.READ_UNCOMMITTED })
        return (offsets.get(s.topic)?.[partition] ?? 0n) > BigInt(base.length + 100)
      }, { timeoutMs: 60_000 })
    } finally {
      await probe.close().catch(() => undefined)
    }
    await kafka.kill()
    const outcome = await attempt.then(() => 'committed', (err: unknown) => err)
    await kafka.start()
    assert.ok(outcome instanceof SinkError && outcome.retriable && /publishing events/.test(outcome.message), `interrupted while publishing, retriable: ${String(outcome)}`)
    // The exporter's retry loop, as the exporter runs it: until the sink reports success.
    let result
    for (let i = 0; ; i++) {
      try {
        result = await s.write(snap)
        break
      } catch (err) {
        assert.ok(err instanceof SinkError && err.retriable, `retriable while the broker comes back: ${String(err)}`)
        if (i > 30) throw err
        await new Promise((r) => setTimeout(r, 1000))
      }
    }
    assert.deepEqual(result, { added: 5000, changed: 0, removed: 1 })
    const records = (await published(s.topic)).slice(base.length)
    const events = records.filter((r) => r.headers[HEADER_EVENT] === 'added')
    assert.equal(events.length, 5000, 'every item published exactly once')
    assert.equal(new Set(events.map((r) => r.key)).size, 5000)
    assert.deepEqual(eventsOf(records.filter((r) => r.headers[HEADER_EVENT] !== 'added')), ['removed', 'snapshot'])
    assert.equal(records.at(-1)?.headers[HEADER_EVENT], 'snapshot')
  })

  test('deletionPolicy Delete: a tombstone per item and for the marker; a later export starts a new life', async () => {
    const s = sink()
    const items = makeItems(4)
    const snap = snapshotOf(INVENTORY, items, CLUSTER)
    await s.write(snap)
    await s.remove(INVENTORY, CLUSTER)
    const records = (await published(s.topic)).slice(5)
    assert.deepEqual(eventsOf(records), ['removed', 'removed', 'removed', 'removed', 'tombstone'])
    for (const r of records) {
      assert.equal(r.value, null, 'Kafka tombstones: compaction forgets the keys')
      assert.equal(r.headers[HEADER_CHECKSUM], EMPTY_CHECKSUM)
    }
    // Removing again publishes nothing; the state topic forgot the inventory, also after a restart.
    await s.remove(INVENTORY, CLUSTER)
    const restarted = sink(s.topic)
    assert.deepEqual(await restarted.write(snap), { added: 4, changed: 0, removed: 0 })
    assert.equal((await published(s.topic)).length, 5 + 5 + 5)
  })

  test('SASL PLAIN and SCRAM from the secret; wrong credentials fail permanently without the secret in the message', async () => {
    const topic = `kt${++topicCounter}`
    for (const saslMechanism of ['PLAIN', 'SCRAM-SHA-256'] as const) {
      const ok = sink(topic, { spec: spec(topic, { brokers: kafka.saslBootstrap, saslMechanism }), credentials: { username: kafka.user, password: kafka.password }, id: `platform/${saslMechanism}` })
      await ok.healthcheck()
    }
    const wrongPassword = 'not-the-password-7c1e'
    const bad = sink(topic, { spec: spec(topic, { brokers: kafka.saslBootstrap }), credentials: { username: kafka.user, password: wrongPassword }, id: 'platform/wrong' })
    const err = await bad.write(snapshotOf(INVENTORY, makeItems(1), CLUSTER)).then(() => undefined, (e: unknown) => e)
    assert.ok(err instanceof SinkError, String(err))
    assert.equal(err.retriable, false, `wrong credentials are permanent: ${err.message}`)
    assert.match(err.message, /kafka sink platform\/wrong/)
    assert.match(err.message, /authentication failed/i, 'the reason names the failure')
    assert.doesNotMatch(err.message, new RegExp(wrongPassword))
    assert.doesNotMatch(err.message, new RegExp(kafka.password))
    // The healthcheck (the sink's Reachable condition) says the same.
    await assert.rejects(bad.healthcheck(), (e: unknown) => e instanceof SinkError && /authentication failed/i.test(e.message) && !e.message.includes(wrongPassword))
    // At once, not after the client's retries: well within the exporter's 4 s check, which would
    // otherwise report a timeout instead of the refused credentials. A fresh sink: nothing cached.
    const fresh = sink(topic, {
      spec: spec(topic, { brokers: kafka.saslBootstrap, saslMechanism: 'SCRAM-SHA-256' }), credentials: { username: kafka.user, password: wrongPassword }, id: 'platform/wrong-scram',
    })
    const started = performance.now()
    await assert.rejects(fresh.healthcheck(), (e: unknown) => e instanceof SinkError && e.retriable === false && /SASL authentication failed/i.test(e.message))
    const tookMs = performance.now() - started
    assert.ok(tookMs < 2000, `the probe answered in ${Math.round(tookMs)} ms`)
  })

  test('TLS with the CA from the secret; without it the broker\'s certificate is refused', async () => {
    const topic = `kt${++topicCounter}`
    const ok = sink(topic, { spec: spec(topic, { brokers: kafka.tlsBootstrap, tls: true }), credentials: { 'ca.crt': kafka.ca }, id: 'platform/tls' })
    assert.deepEqual(await ok.write(snapshotOf(INVENTORY, makeItems(2), CLUSTER)), { added: 2, changed: 0, removed: 0 })
    assert.deepEqual(eventsOf(await published(topic)), ['added', 'added', 'snapshot'])
    const untrusted = sink(topic, { spec: spec(topic, { brokers: kafka.tlsBootstrap, tls: true }), credentials: {}, id: 'platform/untrusted' })
    const err = await untrusted.healthcheck().then(() => undefined, (e: unknown) => e)
    assert.ok(err instanceof SinkError, String(err))
    assert.match(err.message, /certificate/i)
  })

  test('the brokers the cluster advertises pass the SSRF guard: a refused one is a permanent error naming it', async () => {
    const topic = `kt${++topicCounter}`
    const port = kafka.bootstrap.split(':')[1] as string
    // Bootstrap by name, which the guard allows here; the broker advertises itself as 127.0.0.1.
    const s = createKafkaSink({
      id: 'platform/guarded', spec: spec(topic, { brokers: `localhost:${port}` }), credentials: {}, dataDir: '/nonexistent',
      checkEndpoint: async (url) => (url === `kafka://127.0.0.1:${port}/` ? 'host 127.0.0.1 is loopback (private sinks are disabled)' : null),
    })
    closers.push(s)
    const err = await s.write(snapshotOf(INVENTORY, makeItems(1), CLUSTER)).then(() => undefined, (e: unknown) => e)
    assert.ok(err instanceof SinkError && !err.retriable, String(err))
    assert.match(err.message, new RegExp(`broker 127\\.0\\.0\\.1:${port} advertised by the cluster: host 127\\.0\\.0\\.1 is loopback`))
  })

  test('topics are created with the settings; an invalid configuration is a permanent error', async () => {
    const topic = `kt${++topicCounter}`
    const s = sink(topic, { spec: spec(topic, { partitions: 2, cleanupPolicy: 'delete' }) })
    await s.write(snapshotOf(INVENTORY, makeItems(1), CLUSTER))
    const reader = new KafkaService(kafkaSettings({ id: 'test/reader', spec: spec(topic), credentials: {}, dataDir: '/nonexistent' }))
    closers.push(reader)
    assert.equal((await reader.topics()).partitions, 2)
    assert.throws(
      () => createKafkaSink({ id: SINK_ID, spec: { type: 'kafka', kafka: { brokers: 'no-port' } }, credentials: {}, dataDir: '/x' }),
      (e: unknown) => e instanceof SinkError && !e.retriable && /host:port/.test(e.message),
    )
  })
})
