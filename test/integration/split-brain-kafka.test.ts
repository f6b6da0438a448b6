// Issue 12, "sinks stay safe under a brief split brain", for Kafka: two instances of one
// KollectSink (so one transactional id, kollect/<ns>/<name>) write one topic. Sink instances, not
// exporters: fencing is the broker's doing, and split-brain.test.ts covers the exporter around it.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { Item, ObjectRef, Snapshot } from '../../api/types.js'
import type { ItemEvent, SnapshotMarker } from '../../sinks/events.js'
import { kafkaSettings } from '../../sinks/kafka/config.js'
import { partitionFor } from '../../sinks/kafka/encode.js'
import { createKafkaSink } from '../../sinks/kafka/index.js'
import { KafkaService } from '../../sinks/kafka/service.js'
import { decodeState, replay } from '../../sinks/nats/state.js'
import { SinkError, type Sink } from '../../sinks/sink.js'
import { startKafka, type KafkaBroker } from '../support/kafka.js'
import { bumpReplicas, makeItems, snapshotOf } from '../support/items.js'

const CLUSTER = 'lab-west'
const SINK_ID = 'platform/events'

describe('split brain: two exporters\' instances of one Kafka sink on one topic', () => {
  let kafka: KafkaBroker
  const closers: Sink[] = []
  let topics = 0

  before(async () => { kafka = await startKafka() })
  after(async () => {
    for (const c of closers) await c.close().catch(() => undefined)
    await kafka?.destroy()
  })

  function spec(topic: string) {
    return { type: 'kafka' as const, kafka: { brokers: kafka.bootstrap, topic, partitions: 1 } }
  }

  /** Two instances of the same KollectSink, as the old and the new leader hold them. */
  function pair(): { a: Sink; b: Sink; topic: string; inventory: ObjectRef } {
    const topic = `split${++topics}`
    const [a, b] = [0, 1].map(() => createKafkaSink({ id: SINK_ID, spec: spec(topic), credentials: {}, dataDir: '/nonexistent' })) as [Sink, Sink]
    closers.push(a, b)
    return { a, b, topic, inventory: { namespace: 'team-a', name: topic } }
  }

  /** What a read_committed consumer of the inventory's partition sees, in order. */
  async function committed(topic: string, inventory: ObjectRef): Promise<(ItemEvent | SnapshotMarker)[]> {
    const reader = new KafkaService(kafkaSettings({ id: 'test/reader', spec: spec(topic), credentials: {}, dataDir: '/nonexistent' }))
    try {
      const { partitions } = await reader.topics()
      const partition = partitionFor({ cluster: CLUSTER, inventory }, partitions)
      await reader.settled(topic, partition)
      return (await reader.readCommitted(topic, partition)).map((r) => JSON.parse(r.value ?? 'null') as ItemEvent | SnapshotMarker)
    } finally {
      await reader.close()
    }
  }

  /** Applying every committed event gives exactly the last marker's items, and that marker is `expected`. */
  function assertConsumersHold(bodies: (ItemEvent | SnapshotMarker)[], expected: Snapshot, why: string): void {
    const seen = replay(decodeState('', []), bodies.map((body, seq) => ({ seq, body })))
    assert.equal(seen.snapshot?.checksum, expected.checksum, `${why}: the last marker`)
    assert.deepEqual([...seen.items.values()].map((h) => h.item as Item).sort(byUid), [...expected.items].sort(byUid), `${why}: the events give the marker's items`)
  }

  test('a. the same snapshot from both at once: each event once for read_committed consumers', async () => {
    const { a, b, topic, inventory } = pair()
    const snap = snapshotOf(inventory, makeItems(6), CLUSTER)
    // Each registers the transactional id, fencing the other; a fenced one fails and is retried, as the exporter does.
    const outcomes = await Promise.allSettled([a.write(snap), b.write(snap)])
    for (const [i, o] of outcomes.entries()) {
      if (o.status === 'fulfilled') continue
      assert.ok(o.reason instanceof SinkError && o.reason.retriable, `a failed write is retriable: ${String(o.reason)}`)
      assert.deepEqual(await [a, b][i]?.write(snap), { added: 0, changed: 0, removed: 0 }, 'its retry finds the snapshot published')
    }
    const bodies = await committed(topic, inventory)
    assert.deepEqual(bodies.map((m) => m.type), [...Array(6).fill('added'), 'snapshot'], 'each event once, then one marker')
    assertConsumersHold(bodies, snap, 'both wrote it')
  })

  test('b. the fenced old leader gets a retriable error and writes nothing; its retry diffs from the new leader\'s export; the drift check restores the new leader\'s', async () => {
    const { a, b, topic, inventory } = pair()
    const items = makeItems(6)
    const s0 = snapshotOf(inventory, items, CLUSTER)
    assert.deepEqual(await a.write(s0), { added: 6, changed: 0, removed: 0 })
    // The new leader's instance registers the same transactional id: the old one is fenced.
    const s1 = snapshotOf(inventory, [bumpReplicas(items[0] as Item, 60), ...items.slice(1, 5)], CLUSTER)
    assert.deepEqual(await b.write(s1), { added: 0, changed: 1, removed: 1 })
    const before = await committed(topic, inventory)
    // The old leader, still holding s0 as what it last published, writes an older view.
    const s2 = snapshotOf(inventory, [bumpReplicas(items[1] as Item, 61), ...items.slice(2)], CLUSTER)
    const fenced = await a.write(s2).then(() => null, (e: unknown) => e)
    assert.ok(fenced instanceof SinkError, `the fenced producer fails: ${String(fenced)}`)
    assert.equal(fenced.retriable, true, 'retriable: a retry registers the id again, and the writer stops at once when it learns it lost the lease')
    assert.match(fenced.message, /fences the current one/)
    assert.deepEqual(await committed(topic, inventory), before, 'nothing of the fenced attempt is visible')
    // Its retry (before it notices the lost lease) fences the new leader in turn and diffs from s1, not from its stale s0.
    assert.deepEqual(await a.write(s2), { added: 1, changed: 1, removed: 1 })
    const after = await committed(topic, inventory)
    assertConsumersHold(after, s2, 'the old leader wrote last')
    assert.equal(after.length - before.length, 4, 'three events and one marker: no duplicate, none missing')
    // The new leader's exporter never writes s1 again (its checksum shortcut; the sink's cache agrees);
    // its drift check reads what consumers were told, fencing the old leader, and puts s1 back.
    assert.deepEqual(await b.write(s1), { added: 0, changed: 0, removed: 0 }, 'the finding: the same snapshot is skipped')
    assert.equal((await b.verify?.(s1, 'report'))?.differences, 3, 'report: the three items the old leader changed')
    assert.equal((await b.verify?.(s1, 'repair'))?.repaired, true)
    assertConsumersHold(await committed(topic, inventory), s1, 'the new leader restored its snapshot')
  })
})

function byUid(x: Item, y: Item): number {
  return x.uid < y.uid ? -1 : x.uid > y.uid ? 1 : 0
}
