import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { itemKey } from '../../../api/canonical.js'
import type { Item } from '../../../api/types.js'
import { diffItems } from '../../../sinks/diff.js'
import { EMPTY_CHECKSUM, type InventoryAddress, type ItemEvent, type SnapshotMarker } from '../../../sinks/events.js'
import { kafkaSettings } from '../../../sinks/kafka/config.js'
import {
  decodeStates, encodeExport, encodeRemoval, HEADER_EVENT, inventoryKey, inventoryToken, itemEventKey, partitionFor,
  stateItemKey, stateSnapshotKey, type HeldState, type StateRecord, type Topics,
} from '../../../sinks/kafka/encode.js'
import { chunks } from '../../../sinks/kafka/encode.js'
import { explained, isRetriable } from '../../../sinks/kafka/errors.js'
import { SinkError } from '../../../sinks/sink.js'
import { bumpReplicas, makeItems, snapshotOf } from '../../support/items.js'

const AT: InventoryAddress = { cluster: 'lab-west', inventory: { namespace: 'team-a', name: 'prod-inventory' } }
const TOPICS: Topics = { topic: 'kollect', stateTopic: 'kollect.kollect-state', partitions: 6 }
const TOKEN = inventoryToken(TOPICS.topic, AT)
const [A, B, C] = makeItems(3) as [Item, Item, Item]

function heldFrom(items: Item[]): HeldState {
  const snapshot = snapshotOf(AT.inventory, items, AT.cluster)
  return encodeExport(TOPICS, snapshot, { items: new Map() }, diffItems(new Map(), snapshot.items, true)).next
}

describe('kafka keys and partitions', () => {
  test('names are escaped, so no two inventories share a key prefix', () => {
    assert.equal(inventoryKey(AT), 'lab-west/team-a/prod-inventory')
    assert.equal(inventoryKey({ cluster: 'a/b', inventory: { namespace: 'c', name: 'd' } }), 'a%2Fb/c/d')
    assert.notEqual(inventoryKey({ cluster: 'a/b', inventory: { namespace: 'c', name: 'd' } }), inventoryKey({ cluster: 'a', inventory: { namespace: 'b/c', name: 'd' } }))
    assert.equal(itemEventKey(AT, itemKey(A)), `lab-west/team-a/prod-inventory/${itemKey(A)}`)
  })

  test('every record of an inventory lands on one partition, within range', () => {
    for (const partitions of [1, 3, 6, 50]) {
      const p = partitionFor(AT, partitions)
      assert.ok(p >= 0 && p < partitions)
      assert.equal(partitionFor(AT, partitions), p, 'stable')
    }
  })
})

describe('encodeExport', () => {
  test('a first export: one added event per item, the marker, then the state records', () => {
    const snapshot = snapshotOf(AT.inventory, [A, B], AT.cluster)
    const { records, events, next } = encodeExport(TOPICS, snapshot, { items: new Map() }, diffItems(new Map(), snapshot.items, true))
    assert.equal(events, 2)
    assert.deepEqual(records.map((r) => [r.topic, r.headers[HEADER_EVENT] ?? 'state']), [
      ['kollect', 'added'], ['kollect', 'added'], ['kollect', 'snapshot'],
      ['kollect.kollect-state', 'state'], ['kollect.kollect-state', 'state'], ['kollect.kollect-state', 'state'],
    ])
    const partition = partitionFor(AT, TOPICS.partitions)
    assert.ok(records.slice(0, 3).every((r) => r.partition === partition))
    assert.ok(records.slice(3).every((r) => r.partition === 0))
    const marker = JSON.parse(records[2]!.value!) as SnapshotMarker
    assert.deepEqual(marker, { type: 'snapshot', cluster: 'lab-west', inventory: AT.inventory, checksum: snapshot.checksum, previousChecksum: null, itemCount: 2, added: 2, changed: 0, removed: 0 })
    assert.deepEqual(records[5], { topic: TOPICS.stateTopic, partition: 0, key: stateSnapshotKey(TOKEN), value: JSON.stringify({ checksum: snapshot.checksum, itemCount: 2 }), headers: {} })
    assert.deepEqual(next.snapshot, { checksum: snapshot.checksum, itemCount: 2 })
    assert.deepEqual([...next.items.keys()], [itemKey(A), itemKey(B)])
  })

  test('a 1-item change is one event with before and after; a removal one event and a state tombstone', () => {
    const held = heldFrom([A, B])
    const B2 = bumpReplicas(B, 9)
    const snapshot = snapshotOf(AT.inventory, [B2, C], AT.cluster)
    const { records, events } = encodeExport(TOPICS, snapshot, held, diffItems(held.items, snapshot.items, true))
    assert.equal(events, 3)
    const bodies = records.slice(0, 3).map((r) => JSON.parse(r.value!) as ItemEvent)
    assert.deepEqual(bodies.map((b) => b.type), ['added', 'changed', 'removed'])
    assert.equal(bodies[1]!.before?.attributes.replicas, B.attributes.replicas)
    assert.equal(bodies[1]!.after?.attributes.replicas, 9)
    assert.equal(bodies[2]!.before?.uid, A.uid)
    assert.equal(bodies[2]!.after, undefined)
    assert.ok(bodies.every((b) => b.previousChecksum === held.snapshot?.checksum && b.checksum === snapshot.checksum))
    const removedState = records.find((r) => r.key === stateItemKey(TOKEN, itemKey(A)))
    assert.equal(removedState?.value, null)
  })
})

describe('encodeRemoval', () => {
  test('a tombstone per item, then one for the marker key, then the state is forgotten', () => {
    const held = heldFrom([A, B])
    const { records, events, next } = encodeRemoval(TOPICS, AT, held)
    assert.equal(events, 2)
    assert.deepEqual(records.map((r) => [r.topic, r.value, r.headers[HEADER_EVENT] ?? 'state']), [
      ['kollect', null, 'removed'], ['kollect', null, 'removed'], ['kollect', null, 'tombstone'],
      ['kollect.kollect-state', null, 'state'], ['kollect.kollect-state', null, 'state'], ['kollect.kollect-state', null, 'state'],
    ])
    assert.ok(records.slice(0, 3).every((r) => r.headers['kollect-checksum'] === EMPTY_CHECKSUM))
    assert.deepEqual(next, { items: new Map() })
  })
})

describe('decodeStates', () => {
  const stateRecords = (records: { topic: string; key: string; value: string | null }[]): StateRecord[] =>
    records.filter((r) => r.topic === TOPICS.stateTopic).map(({ key, value }) => ({ key, value }))

  test('replaying the state records of a run of exports gives the last export state', () => {
    const first = snapshotOf(AT.inventory, [A, B], AT.cluster)
    const e1 = encodeExport(TOPICS, first, { items: new Map() }, diffItems(new Map(), first.items, true))
    const second = snapshotOf(AT.inventory, [B, C], AT.cluster)
    const e2 = encodeExport(TOPICS, second, e1.next, diffItems(e1.next.items, second.items, true))
    const states = decodeStates([...stateRecords(e1.records), ...stateRecords(e2.records), { key: 'foreign', value: 'x' }, { key: `${TOKEN}|i|bad`, value: '{' }])
    const state = states.get(TOKEN)
    assert.deepEqual(state?.snapshot, { checksum: second.checksum, itemCount: 2 })
    assert.deepEqual([...(state?.items.keys() ?? [])].sort(), [itemKey(B), itemKey(C)].sort())
    assert.equal(states.size, 1, 'records that are not the sink\'s are skipped')
  })

  test('after a removal nothing is held', () => {
    const held = heldFrom([A])
    const first = snapshotOf(AT.inventory, [A], AT.cluster)
    const e1 = encodeExport(TOPICS, first, { items: new Map() }, diffItems(new Map(), first.items, true))
    const states = decodeStates([...stateRecords(e1.records), ...stateRecords(encodeRemoval(TOPICS, AT, held).records)])
    assert.equal(states.get(TOKEN), undefined)
  })
})

describe('chunks', () => {
  test('consecutive runs below the byte budget, keeping order; an oversized record goes alone', () => {
    const rec = (n: number) => ({ topic: 't', partition: 0, key: 'k', value: 'x'.repeat(n), headers: {} })
    const out = chunks([rec(100), rec(100), rec(1000), rec(10)], 400)
    assert.deepEqual(out.map((c) => c.map((r) => r.value!.length)), [[100, 100], [1000], [10]])
  })
})

describe('kafkaSettings', () => {
  const base = { id: 'platform/events', dataDir: '/x', credentials: {} }
  const cases: { reason: string; kafka: Record<string, unknown>; credentials?: Record<string, string>; error?: RegExp }[] = [
    { reason: 'brokers are host:port', kafka: { brokers: 'kafka:9092,[::1]:9093' } },
    { reason: 'a broker without a port is refused', kafka: { brokers: 'kafka' }, error: /host:port/ },
    { reason: 'a topic name outside Kafka\'s characters is refused', kafka: { brokers: 'k:1', topic: 'a b' }, error: /topic/ },
    { reason: 'the state topic cannot be the events topic', kafka: { brokers: 'k:1', topic: 'a', stateTopic: 'a' }, error: /differ/ },
    { reason: 'partitions must be positive', kafka: { brokers: 'k:1', partitions: 0 }, error: /partitions/ },
    { reason: 'a password without a user is refused', kafka: { brokers: 'k:1' }, credentials: { password: 'p' }, error: /both username and password/ },
    { reason: 'a SASL mechanism needs credentials', kafka: { brokers: 'k:1', saslMechanism: 'PLAIN' }, error: /needs username/ },
    { reason: 'a client certificate needs its key', kafka: { brokers: 'k:1', tls: true }, credentials: { 'tls.crt': 'c' }, error: /tls.key/ },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const run = () => kafkaSettings({ ...base, credentials: c.credentials ?? {}, spec: { type: 'kafka', kafka: c.kafka as { brokers: string } } })
      if (c.error) assert.throws(run, (e: unknown) => e instanceof SinkError && !e.retriable && c.error!.test(e.message))
      else assert.doesNotThrow(run)
    })
  }

  test('defaults, SASL and TLS from the secret; every secret value is masked', () => {
    const s = kafkaSettings({
      ...base, credentials: { username: 'svc', password: 'pw-123', 'ca.crt': 'CA' },
      spec: { type: 'kafka', kafka: { brokers: 'k:1', tls: true, saslMechanism: 'SCRAM-SHA-512' } },
    })
    assert.deepEqual([s.topic, s.stateTopic, s.cleanupPolicy, s.partitions, s.transactionalId], ['kollect', 'kollect.kollect-state', 'compact', undefined, 'kollect/platform/events'])
    assert.deepEqual(s.sasl, { mechanism: 'SCRAM-SHA-512', username: 'svc', password: 'pw-123' })
    assert.deepEqual(s.tls, { ca: 'CA' })
    assert.ok(s.secrets.values.includes('pw-123'))
  })
})

describe('isRetriable and explained', () => {
  // Shaped as @platformatic/kafka reports them: a code, a canRetry flag, AggregateErrors around the cause.
  const clientError = (message: string, code: string, canRetry: boolean) => Object.assign(new Error(message), { code, canRetry })
  const wrapped = (inner: Error) => Object.assign(new AggregateError([inner], 'metadata failed 4 times.'), { code: 'PLT_KFK_MULTIPLE' })
  const cases: { reason: string; err: unknown; retriable: boolean }[] = [
    { reason: 'a broker that went away', err: wrapped(clientError('Connection to 127.0.0.1:9092 failed.', 'PLT_KFK_NETWORK', true)), retriable: true },
    { reason: 'a refused connection', err: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), retriable: true },
    { reason: 'wrong credentials', err: wrapped(clientError('SASL authentication failed.', 'PLT_KFK_AUTHENTICATION', false)), retriable: false },
    { reason: 'a record above the broker\'s message size',
      err: clientError('The request included a message larger than the max message size the server will accept.', 'PLT_KFK_PROTOCOL', false),
      retriable: false },
    { reason: 'fenced by a newer producer with the same transactional id (split brain): the retry registers it again',
      err: clientError('Received response with error while executing API AddPartitionsToTxn(v5): ' +
        'There is a newer producer with the same transactionalId which fences the current one.', 'PLT_KFK_RESPONSE', false),
      retriable: true },
    { reason: 'a coordinator still loading', err: clientError('The coordinator is loading and hence can\'t process requests.', 'PLT_KFK_PROTOCOL', true), retriable: true },
  ]
  for (const c of cases) test(c.reason, () => assert.equal(isRetriable(c.err), c.retriable))

  test('the inner reason is named, an authentication failure first, and the original stays the cause', async () => {
    const auth = clientError('SASL authentication failed.', 'PLT_KFK_AUTHENTICATION', false)
    const outer = wrapped(wrapped(auth))
    const err = await explained(() => Promise.reject(outer)).then(() => undefined, (e: unknown) => e as Error)
    assert.equal(err?.message, 'metadata failed 4 times.: SASL authentication failed.')
    assert.equal(err?.cause, outer)
    assert.equal(isRetriable(err), false)
    const plain = new Error('nothing inside')
    assert.equal(await explained(() => Promise.reject(plain)).catch((e: unknown) => e), plain)
  })
})
