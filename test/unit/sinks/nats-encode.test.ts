import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { itemHash, itemKey } from '../../../api/canonical.js'
import type { Item } from '../../../api/types.js'
import { diffItems, type HeldItem } from '../../../sinks/diff.js'
import { EMPTY_CHECKSUM, type InventoryAddress, type ItemEvent, type SnapshotMarker } from '../../../sinks/events.js'
import { encodeExport, encodeRemoval, itemMessageId, markerMessageId, subjectFor, type Transition } from '../../../sinks/nats/encode.js'
import {
  decodeState, encodeHeldSnapshot, inventoryStateFilter, inventoryToken, itemsStateFilter, itemStateKey, replay, replayFrom, snapshotStateKey,
  stateUpdates, transitionFrom, type InventoryState, type PublishedMessage, type StateEntry,
} from '../../../sinks/nats/state.js'
import { bumpReplicas, makeItems, snapshotOf } from '../../support/items.js'

const AT: InventoryAddress = { cluster: 'lab-west', inventory: { namespace: 'team-a', name: 'prod-inventory' } }
const PREFIX = 'kollect.inventory'
const TOKEN = inventoryToken('KOLLECT', PREFIX, AT)
const [A, B, C] = makeItems(3) as [Item, Item, Item]
const B2 = bumpReplicas(B, 9)
const enc = new TextEncoder()

function heldOf(...items: Item[]): Map<string, HeldItem> {
  return new Map(items.map((item) => [itemKey(item), { hash: itemHash(item), item }]))
}

function transition(overrides: Partial<Transition> = {}): Transition {
  return { ...AT, token: TOKEN, previousChecksum: 'p'.repeat(64), checksum: 'c'.repeat(64), revision: 4, markerSequence: 10, positions: new Map(), ...overrides }
}

function state(overrides: Partial<InventoryState> = {}): InventoryState {
  const items = overrides.items ?? new Map()
  return {
    revision: 0, items, recorded: items, unrecorded: false, markerSequence: 0, positions: new Map(), sinceMarker: { added: 0, changed: 0, removed: 0 }, ...overrides,
  }
}

describe('subjects and keys', () => {
  const subjects: { reason: string; at: InventoryAddress; type: Parameters<typeof subjectFor>[2]; want: string }[] = [
    { reason: 'an item event', at: AT, type: 'added', want: 'kollect.inventory.lab-west.team-a.prod-inventory.added' },
    { reason: 'the marker', at: AT, type: 'snapshot', want: 'kollect.inventory.lab-west.team-a.prod-inventory.snapshot' },
    { reason: 'the filter for every message of the inventory', at: AT, type: '*', want: 'kollect.inventory.lab-west.team-a.prod-inventory.*' },
    {
      reason: 'dots, wildcards and spaces in names stay inside their token',
      at: { cluster: 'lab.west', inventory: { namespace: '*', name: 'a >b' } }, type: 'removed',
      want: 'kollect.inventory.lab%2Ewest.%2A.a%20%3Eb.removed',
    },
    { reason: 'empty names are still a token', at: { cluster: '', inventory: { namespace: '', name: '' } }, type: 'changed', want: 'kollect.inventory.%.%.%.changed' },
  ]
  for (const c of subjects) {
    test(`subjectFor: ${c.reason}`, () => {
      const subject = subjectFor(PREFIX, c.at, c.type)
      assert.equal(subject, c.want)
      assert.equal(subject.split('.').length, 6, 'prefix (2 tokens), cluster, namespace, name, type')
    })
  }

  test('inventoryToken: 32 hex characters, distinct per stream, prefix, cluster, namespace and name', () => {
    const tokens = [
      TOKEN,
      inventoryToken('OTHER', PREFIX, AT),
      inventoryToken('KOLLECT', 'other.prefix', AT),
      inventoryToken('KOLLECT', PREFIX, { ...AT, cluster: 'lab-east' }),
      inventoryToken('KOLLECT', PREFIX, { ...AT, inventory: { namespace: 'team-b', name: 'prod-inventory' } }),
      inventoryToken('KOLLECT', PREFIX, { ...AT, inventory: { namespace: 'team-a', name: 'other' } }),
      // Joined naively these two would read "team-a/x/y" both.
      inventoryToken('KOLLECT', PREFIX, { ...AT, inventory: { namespace: 'team-a/x', name: 'y' } }),
      inventoryToken('KOLLECT', PREFIX, { ...AT, inventory: { namespace: 'team-a', name: 'x/y' } }),
    ]
    for (const t of tokens) assert.match(t, /^[0-9a-f]{32}$/)
    assert.equal(new Set(tokens).size, tokens.length)
    assert.equal(inventoryToken('KOLLECT', PREFIX, structuredClone(AT)), TOKEN, 'stable for equal input')
  })

  test('KV keys: the item key is hashed (KV keys allow no "/" or "%"), under the inventory token', () => {
    assert.match(itemStateKey(TOKEN, itemKey(A)), new RegExp(`^${TOKEN}\\.i\\.[0-9a-f]{40}$`))
    assert.notEqual(itemStateKey(TOKEN, itemKey(A)), itemStateKey(TOKEN, itemKey(B)))
    assert.equal(snapshotStateKey(TOKEN), `${TOKEN}.snapshot`)
    assert.equal(itemsStateFilter(TOKEN), `${TOKEN}.i.>`)
    assert.equal(inventoryStateFilter(TOKEN), `${TOKEN}.>`)
  })

  test('EMPTY_CHECKSUM is the checksum of an empty snapshot', () => {
    assert.equal(EMPTY_CHECKSUM, snapshotOf(AT.inventory, []).checksum)
    assert.equal(EMPTY_CHECKSUM, 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855')
  })

  test('encodeHeldSnapshot: checksum, count and sequence, which is left out when unknown', () => {
    assert.equal(encodeHeldSnapshot({ checksum: 'x', itemCount: 2, sequence: 7 }), '{"checksum":"x","itemCount":2,"sequence":7}')
    assert.equal(encodeHeldSnapshot({ checksum: 'x', itemCount: 2 }), '{"checksum":"x","itemCount":2}')
  })
})

describe('decodeState and replayFrom', () => {
  const put = (key: string, revision: number, value: unknown): StateEntry => ({ key, revision, operation: 'PUT', value: enc.encode(JSON.stringify(value)) })
  const del = (key: string, revision: number): StateEntry => ({ key, revision, operation: 'DEL', value: new Uint8Array() })
  const snap = snapshotStateKey(TOKEN)
  const keyA = itemStateKey(TOKEN, itemKey(A))
  const keyB = itemStateKey(TOKEN, itemKey(B))

  test('nothing stored: revision 0, no snapshot, no items; replay the whole stream', () => {
    const s = decodeState(TOKEN, [])
    assert.deepEqual({ revision: s.revision, snapshot: s.snapshot, items: s.items, markerSequence: s.markerSequence, unrecorded: s.unrecorded }, {
      revision: 0, snapshot: undefined, items: new Map(), markerSequence: 0, unrecorded: false,
    })
    assert.equal(replayFrom(s), 0)
  })

  test('items and the snapshot record; a later entry wins and a delete removes', () => {
    const s = decodeState(TOKEN, [
      put(keyA, 1, A), put(keyB, 2, B), put(snap, 3, { checksum: 'c1', itemCount: 2, sequence: 12 }),
      put(keyB, 4, B2), del(keyA, 5), put(snap, 6, { checksum: 'c2', itemCount: 1, sequence: 20 }),
    ])
    assert.equal(s.revision, 6, 'the revision of the snapshot key')
    assert.deepEqual(s.snapshot, { checksum: 'c2', itemCount: 1, sequence: 20 })
    assert.deepEqual(s.items, heldOf(B2))
    assert.equal(s.recorded, s.items)
    assert.equal(s.markerSequence, 20)
    assert.equal(replayFrom(s), 20)
  })

  test('a deleted snapshot record: no snapshot, but its revision counts', () => {
    const s = decodeState(TOKEN, [put(snap, 3, { checksum: 'c1', itemCount: 0, sequence: 12 }), del(snap, 4)])
    assert.equal(s.revision, 4)
    assert.equal(s.snapshot, undefined)
    assert.equal(replayFrom(s), 0)
  })

  test('a record written before markers were kept: no sequence, so nothing to replay', () => {
    const s = decodeState(TOKEN, [put(snap, 1, { checksum: 'c1', itemCount: 0 })])
    assert.equal(s.markerSequence, 0)
    assert.equal(replayFrom(s), undefined)
  })
})

describe('replay', () => {
  const event = (type: ItemEvent['type'], item: Item, after?: Item): ItemEvent => ({
    type, ...AT, key: itemKey(item), checksum: 'c', previousChecksum: null, ...(type === 'added' ? { after: item } : type === 'changed' ? { before: item, after } : { before: item }),
  })
  const marker = (type: SnapshotMarker['type'], checksum: string, itemCount: number): SnapshotMarker => ({
    type, ...AT, checksum, previousChecksum: null, itemCount, added: 0, changed: 0, removed: 0,
  })
  const recorded = state({ revision: 3, items: heldOf(A, B), snapshot: { checksum: 'c1', itemCount: 2, sequence: 10 }, markerSequence: 10 })

  test('no messages after the marker: the recorded state itself', () => {
    assert.equal(replay(recorded, []), recorded)
  })

  test('events after the last marker are applied and counted toward the next marker', () => {
    const messages: PublishedMessage[] = [{ seq: 11, body: event('added', C) }, { seq: 12, body: event('changed', B, B2) }, { seq: 13, body: event('removed', A) }]
    const s = replay(recorded, messages)
    assert.deepEqual(s.items, heldOf(B2, C))
    assert.deepEqual(s.recorded, heldOf(A, B), 'the recorded items are untouched')
    assert.equal(s.unrecorded, true)
    assert.deepEqual(s.sinceMarker, { added: 1, changed: 1, removed: 1 })
    assert.deepEqual(s.positions, new Map([[itemKey(C), 11], [itemKey(B), 12], [itemKey(A), 13]]))
    assert.equal(s.markerSequence, 10)
    assert.equal(s.revision, 3)
  })

  test('an unrecorded marker becomes the snapshot; only events after it count toward the next', () => {
    const s = replay(recorded, [{ seq: 11, body: event('added', C) }, { seq: 12, body: marker('snapshot', 'c2', 3) }, { seq: 13, body: event('removed', A) }])
    assert.deepEqual(s.snapshot, { checksum: 'c2', itemCount: 3, sequence: 12 })
    assert.equal(s.markerSequence, 12)
    assert.deepEqual(s.sinceMarker, { added: 0, changed: 0, removed: 1 })
    assert.deepEqual(s.items, heldOf(B, C))
  })

  test('a tombstone empties the inventory and leaves no snapshot', () => {
    const s = replay(recorded, [{ seq: 11, body: event('removed', A) }, { seq: 12, body: marker('tombstone', EMPTY_CHECKSUM, 0) }])
    assert.equal(s.snapshot, undefined)
    assert.equal(s.items.size, 0)
    assert.equal(s.markerSequence, 12)
    assert.deepEqual(s.sinceMarker, { added: 0, changed: 0, removed: 0 })
  })
})

describe('message ids', () => {
  const t = transition()
  const key = itemKey(B)
  const base = itemMessageId(t, 'changed', key, B, B2)

  test('transitionFrom takes what consumers have seen', () => {
    const s = state({ revision: 7, markerSequence: 30, snapshot: { checksum: 'prev', itemCount: 1, sequence: 30 }, positions: new Map([[key, 31]]) })
    assert.deepEqual(transitionFrom(TOKEN, AT, s, 'next'), { ...AT, token: TOKEN, previousChecksum: 'prev', checksum: 'next', revision: 7, markerSequence: 30, positions: s.positions })
    assert.equal(transitionFrom(TOKEN, AT, state(), 'next').previousChecksum, null)
  })

  test('an item event id is a sha256, and equal for the same change retried under another snapshot', () => {
    assert.match(base, /^[0-9a-f]{64}$/)
    assert.equal(itemMessageId(transition({ checksum: 'd'.repeat(64), previousChecksum: null, markerSequence: 99 }), 'changed', key, B, B2), base)
  })

  const differing: { reason: string; id: string }[] = [
    { reason: 'another inventory', id: itemMessageId(transition({ token: inventoryToken('KOLLECT', PREFIX, { ...AT, cluster: 'x' }) }), 'changed', key, B, B2) },
    { reason: 'a later recorded export', id: itemMessageId(transition({ revision: 5 }), 'changed', key, B, B2) },
    { reason: 'a later unrecorded event of the item', id: itemMessageId(transition({ positions: new Map([[key, 11]]) }), 'changed', key, B, B2) },
    { reason: 'another item', id: itemMessageId(t, 'changed', itemKey(C), B, B2) },
    { reason: 'another type', id: itemMessageId(t, 'removed', key, B) },
    { reason: 'another before', id: itemMessageId(t, 'changed', key, bumpReplicas(B, 3), B2) },
    { reason: 'another after', id: itemMessageId(t, 'changed', key, B, bumpReplicas(B, 3)) },
    { reason: 'the reverse change', id: itemMessageId(t, 'changed', key, B2, B) },
  ]
  for (const c of differing) test(`an item event id differs for ${c.reason}`, () => assert.notEqual(c.id, base))

  test('another item\'s position does not move this item\'s id', () => {
    assert.equal(itemMessageId(transition({ positions: new Map([[itemKey(C), 11]]) }), 'changed', key, B, B2), base)
  })

  const marker = markerMessageId(t, 'snapshot')
  const markers: { reason: string; id: string; same: boolean }[] = [
    { reason: 'the same transition', id: markerMessageId(transition(), 'snapshot'), same: true },
    { reason: 'other item positions', id: markerMessageId(transition({ positions: new Map([[key, 11]]) }), 'snapshot'), same: true },
    { reason: 'another checksum', id: markerMessageId(transition({ checksum: 'd'.repeat(64) }), 'snapshot'), same: false },
    { reason: 'another previous checksum', id: markerMessageId(transition({ previousChecksum: null }), 'snapshot'), same: false },
    { reason: 'another revision', id: markerMessageId(transition({ revision: 5 }), 'snapshot'), same: false },
    { reason: 'another previous marker', id: markerMessageId(transition({ markerSequence: 11 }), 'snapshot'), same: false },
    { reason: 'a tombstone', id: markerMessageId(t, 'tombstone'), same: false },
    { reason: 'another inventory', id: markerMessageId(transition({ token: 'f'.repeat(32) }), 'snapshot'), same: false },
  ]
  for (const c of markers) test(`a marker id is ${c.same ? 'equal' : 'different'} for ${c.reason}`, () => (c.same ? assert.equal : assert.notEqual)(c.id, marker))
})

describe('encodeExport', () => {
  const t = transition()
  const diff = diffItems(heldOf(A, B), [B2, C], true)

  test('one event per change (added, changed, removed), then the marker on the snapshot subject', () => {
    const { events, marker } = encodeExport(PREFIX, t, diff, 2, { added: 0, changed: 0, removed: 0 })
    assert.deepEqual(events.map((e) => e.subject), [
      'kollect.inventory.lab-west.team-a.prod-inventory.added',
      'kollect.inventory.lab-west.team-a.prod-inventory.changed',
      'kollect.inventory.lab-west.team-a.prod-inventory.removed',
    ])
    assert.deepEqual(events.map((e) => JSON.parse(e.payload) as unknown), [
      { type: 'added', ...AT, key: itemKey(C), checksum: t.checksum, previousChecksum: t.previousChecksum, after: C },
      { type: 'changed', ...AT, key: itemKey(B), checksum: t.checksum, previousChecksum: t.previousChecksum, before: B, after: B2 },
      { type: 'removed', ...AT, key: itemKey(A), checksum: t.checksum, previousChecksum: t.previousChecksum, before: A },
    ])
    assert.deepEqual(events.map((e) => e.msgID), [
      itemMessageId(t, 'added', itemKey(C), undefined, C), itemMessageId(t, 'changed', itemKey(B), B, B2), itemMessageId(t, 'removed', itemKey(A), A),
    ])
    assert.ok(events.every((e) => e.checksum === t.checksum), 'every message carries the snapshot checksum header')
    assert.equal(marker.subject, 'kollect.inventory.lab-west.team-a.prod-inventory.snapshot')
    assert.equal(marker.msgID, markerMessageId(t, 'snapshot'))
    assert.deepEqual(JSON.parse(marker.payload), {
      type: 'snapshot', ...AT, checksum: t.checksum, previousChecksum: t.previousChecksum, itemCount: 2, added: 1, changed: 1, removed: 1,
    })
  })

  test('the marker counts unrecorded events since the previous marker as well', () => {
    const { marker } = encodeExport(PREFIX, t, diff, 2, { added: 2, changed: 0, removed: 5 })
    assert.deepEqual(JSON.parse(marker.payload), { ...JSON.parse(encodeExport(PREFIX, t, diff, 2, { added: 0, changed: 0, removed: 0 }).marker.payload), added: 3, removed: 6 })
  })

  test('no change: no events, a marker with zero counts; a first export says previousChecksum null', () => {
    const first = transition({ previousChecksum: null })
    const { events, marker } = encodeExport(PREFIX, first, diffItems(heldOf(A), [A]), 1, { added: 0, changed: 0, removed: 0 })
    assert.deepEqual(events, [])
    assert.deepEqual(JSON.parse(marker.payload), { type: 'snapshot', ...AT, checksum: first.checksum, previousChecksum: null, itemCount: 1, added: 0, changed: 0, removed: 0 })
  })

  test('stateUpdates: puts for added and changed items, removals by KV key', () => {
    const { puts, removals } = stateUpdates(TOKEN, diff)
    assert.deepEqual(puts, [[itemStateKey(TOKEN, itemKey(C)), JSON.stringify(C)], [itemStateKey(TOKEN, itemKey(B2)), JSON.stringify(B2)]])
    assert.deepEqual(removals, [itemStateKey(TOKEN, itemKey(A))])
  })
})

describe('encodeRemoval', () => {
  test('every held item removed, then a tombstone with item count 0', () => {
    const t = transition({ checksum: EMPTY_CHECKSUM })
    const { events, marker } = encodeRemoval(PREFIX, t, state({ items: heldOf(A, B), sinceMarker: { added: 1, changed: 0, removed: 0 } }))
    assert.deepEqual(events.map((e) => JSON.parse(e.payload) as unknown), [
      { type: 'removed', ...AT, key: itemKey(A), checksum: EMPTY_CHECKSUM, previousChecksum: t.previousChecksum, before: A },
      { type: 'removed', ...AT, key: itemKey(B), checksum: EMPTY_CHECKSUM, previousChecksum: t.previousChecksum, before: B },
    ])
    assert.equal(marker.subject, 'kollect.inventory.lab-west.team-a.prod-inventory.snapshot')
    assert.equal(marker.msgID, markerMessageId(t, 'tombstone'))
    assert.deepEqual(JSON.parse(marker.payload), {
      type: 'tombstone', ...AT, checksum: EMPTY_CHECKSUM, previousChecksum: t.previousChecksum, itemCount: 0, added: 1, changed: 0, removed: 2,
    })
  })

  test('an inventory holding nothing: only the tombstone', () => {
    const { events, marker } = encodeRemoval(PREFIX, transition(), state())
    assert.deepEqual(events, [])
    assert.equal((JSON.parse(marker.payload) as SnapshotMarker).removed, 0)
  })
})
