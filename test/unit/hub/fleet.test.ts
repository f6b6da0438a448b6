import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import fc from 'fast-check'
import { canonicalJson, itemKey } from '../../../api/canonical.js'
import { parseHubConfig } from '../../../hub/config.js'
import { applyMessage, inventoryKey, snapshotOf, type FleetState, type HeldInventory, type StreamMessage } from '../../../hub/fleet.js'
import { renderSnapshot } from '../../../sinks/document.js'
import { heapPerElement } from '../../support/heap.js'
import { bumpReplicas, makeItems } from '../../support/items.js'

const INV = { namespace: 'team-a', name: 'fleet' }
const ALLOWED = new Set(['east', 'west'])
const [A, B] = makeItems(2) as [ReturnType<typeof makeItems>[number], ReturnType<typeof makeItems>[number]]

function msg(seq: number, subject: string, body: Record<string, unknown>): StreamMessage {
  return { subject, seq, time: `2026-01-01T00:00:0${seq % 10}.000Z`, body: { cluster: 'east', inventory: INV, ...body } }
}
const added = (seq: number, item = A) => msg(seq, 'kollect.east.team-a.fleet.added', { type: 'added', key: itemKey(item), after: item })

describe('hub fleet state', () => {
  const refusals: { reason: string; message: StreamMessage; says: RegExp }[] = [
    { reason: 'a body naming another cluster than its subject', message: { ...added(1), body: { ...(added(1).body as object), cluster: 'west' } }, says: /cluster "west" published under kollect\.east/ },
    { reason: 'a cluster the hub does not fan in', message: msg(1, 'kollect.north.team-a.fleet.added', { cluster: 'north', type: 'added', key: itemKey(A), after: A }), says: /not in the hub's clusters/ },
    { reason: 'a body naming another inventory than its subject', message: msg(1, 'kollect.east.team-a.other.added', { type: 'added', key: itemKey(A), after: A }), says: /inventory team-a\/fleet published under/ },
    { reason: 'an event whose item is not its key', message: msg(1, 'kollect.east.team-a.fleet.added', { type: 'added', key: itemKey(B), after: A }), says: /carries no matching item/ },
    { reason: 'not JSON of an event', message: { subject: 'kollect.east.team-a.fleet.added', seq: 1, time: '', body: null }, says: /not a Kollect event/ },
    // Issue 24, F13: "/" would join a cluster and a namespace into another cluster's key.
    { reason: 'a cluster label with "/", even one the hub lists', message: { subject: 'kollect.prod%2Feu.team-a.fleet.added', seq: 1, time: '', body: { cluster: 'prod/eu', inventory: INV, type: 'added', key: itemKey(A), after: A } }, says: /^cluster "prod\/eu" is not a cluster label: / },
    { reason: 'a namespace with "/"', message: msg(1, 'kollect.east.eu%2Fteam.fleet.added', { inventory: { namespace: 'eu/team', name: 'fleet' }, type: 'added', key: itemKey(A), after: A }), says: /^inventory "eu\/team\/fleet" is not a Kubernetes namespace and name$/ },
    { reason: 'an upper-case namespace', message: msg(1, 'kollect.east.Team.fleet.added', { inventory: { namespace: 'Team', name: 'fleet' }, type: 'added', key: itemKey(A), after: A }), says: /is not a Kubernetes namespace and name/ },
    { reason: 'a name that is no Kubernetes name', message: msg(1, 'kollect.east.team-a.a%2Fb.added', { inventory: { namespace: 'team-a', name: 'a/b' }, type: 'added', key: itemKey(A), after: A }), says: /is not a Kubernetes namespace and name/ },
  ]
  for (const { reason, message, says } of refusals) {
    test(`refuses ${reason}`, () => {
      const state: FleetState = {}
      const verdict = applyMessage(state, 'kollect', new Set([...ALLOWED, 'prod/eu']), message)
      assert.equal(verdict.kind, 'refused')
      assert.match((verdict as { reason: string }).reason, says)
      assert.deepEqual(Object.values(state).flatMap((h) => Object.keys(h.items)), [])
    })
  }

  test('a marker exports the items its events gave; a redelivered older event changes nothing', () => {
    const state: FleetState = {}
    applyMessage(state, 'kollect', ALLOWED, added(1, A))
    applyMessage(state, 'kollect', ALLOWED, added(2, B))
    const A2 = bumpReplicas(A, 9)
    applyMessage(state, 'kollect', ALLOWED, msg(3, 'kollect.east.team-a.fleet.changed', { type: 'changed', key: itemKey(A), before: A, after: A2 }))
    assert.equal(applyMessage(state, 'kollect', ALLOWED, added(1, A)).kind, 'seen')
    applyMessage(state, 'kollect', ALLOWED, msg(4, 'kollect.east.team-a.fleet.removed', { type: 'removed', key: itemKey(B), before: B }))
    assert.equal(applyMessage(state, 'kollect', ALLOWED, added(2, B)).kind, 'seen')
    const want = snapshotOf({ cluster: 'east', inventory: INV, items: { a: { seq: 3, item: A2 } }, markerSeq: 0, checksum: null, lastMarkerAt: null })
    const verdict = applyMessage(state, 'kollect', ALLOWED, msg(5, 'kollect.east.team-a.fleet.snapshot', { type: 'snapshot', checksum: want.checksum }))
    assert.deepEqual(verdict, { kind: 'snapshot', key: 'east/team-a/fleet', snapshot: want, lastMarkerAt: '2026-01-01T00:00:05.000Z' })
    assert.equal(applyMessage(state, 'kollect', ALLOWED, msg(5, 'kollect.east.team-a.fleet.snapshot', { type: 'snapshot', checksum: want.checksum })).kind, 'seen')
  })

  // Issue 25, scenario 6: a copy of an item's first event, re-published, is newer on the stream.
  test('an event that does not follow the last marker applied (a re-published copy) changes nothing', () => {
    const state: FleetState = {}
    const first = msg(1, 'kollect.east.team-a.fleet.added', { type: 'added', key: itemKey(A), after: A, previousChecksum: null })
    applyMessage(state, 'kollect', ALLOWED, first)
    const one = snapshotOf(state['east/team-a/fleet'] as HeldInventory)
    assert.equal(applyMessage(state, 'kollect', ALLOWED, msg(2, 'kollect.east.team-a.fleet.snapshot', { type: 'snapshot', checksum: one.checksum, previousChecksum: null })).kind, 'snapshot')
    const A2 = bumpReplicas(A, 9)
    applyMessage(state, 'kollect', ALLOWED, msg(3, 'kollect.east.team-a.fleet.changed', { type: 'changed', key: itemKey(A), before: A, after: A2, previousChecksum: one.checksum }))
    const two = snapshotOf(state['east/team-a/fleet'] as HeldInventory)
    assert.equal(applyMessage(state, 'kollect', ALLOWED, msg(4, 'kollect.east.team-a.fleet.snapshot', { type: 'snapshot', checksum: two.checksum, previousChecksum: one.checksum })).kind, 'snapshot')
    assert.equal(applyMessage(state, 'kollect', ALLOWED, { ...first, seq: 5 }).kind, 'seen')
    applyMessage(state, 'kollect', ALLOWED, msg(6, 'kollect.east.team-a.fleet.added', { type: 'added', key: itemKey(B), after: B, previousChecksum: two.checksum }))
    const three = snapshotOf({ cluster: 'east', inventory: INV, items: { a: { seq: 3, item: A2 }, b: { seq: 6, item: B } }, markerSeq: 0, checksum: null, lastMarkerAt: null })
    assert.equal(applyMessage(state, 'kollect', ALLOWED, msg(7, 'kollect.east.team-a.fleet.snapshot', { type: 'snapshot', checksum: three.checksum, previousChecksum: two.checksum })).kind, 'snapshot')
  })

  test('a copy of a change whose before is not the held item (an interrupted export, retried) changes nothing', () => {
    const state: FleetState = {}
    const [A2, A3] = [bumpReplicas(A, 2), bumpReplicas(A, 3)]
    const change = (seq: number, before: typeof A, after: typeof A) => msg(seq, 'kollect.east.team-a.fleet.changed', { type: 'changed', key: itemKey(A), before, after })
    applyMessage(state, 'kollect', ALLOWED, added(1, A))
    applyMessage(state, 'kollect', ALLOWED, change(2, A, A2))
    applyMessage(state, 'kollect', ALLOWED, change(3, A2, A3))
    assert.equal(applyMessage(state, 'kollect', ALLOWED, change(4, A, A2)).kind, 'seen')
    assert.equal(applyMessage(state, 'kollect', ALLOWED, msg(5, 'kollect.east.team-a.fleet.removed', { type: 'removed', key: itemKey(A), before: A2 })).kind, 'seen')
    assert.deepEqual((state['east/team-a/fleet'] as HeldInventory).items[itemKey(A)], { seq: 3, item: A3 })
  })

  test('a marker whose checksum the held items do not give is not exported', () => {
    const state: FleetState = {}
    applyMessage(state, 'kollect', ALLOWED, added(1, A))
    const verdict = applyMessage(state, 'kollect', ALLOWED, msg(2, 'kollect.east.team-a.fleet.snapshot', { type: 'snapshot', checksum: 'other' }))
    assert.equal(verdict.kind, 'incomplete')
  })
})

describe('inventoryKey', () => {
  test('valid names keep the key (and the store file) they had', () => {
    assert.equal(inventoryKey('east', INV), 'east/team-a/fleet')
  })

  test('property: two different (cluster, namespace, name) never share a key, whatever "/" or "%" they hold', () => {
    const part = fc.string({ unit: fc.constantFrom('a', '/', '%', '.', 'e'), maxLength: 6 })
    fc.assert(fc.property(part, part, part, part, part, part, (c1, n1, m1, c2, n2, m2) => {
      const same = c1 === c2 && n1 === n2 && m1 === m2
      assert.equal(inventoryKey(c1, { namespace: n1, name: m1 }) === inventoryKey(c2, { namespace: n2, name: m2 }), same)
    }), { numRuns: 5000, examples: [['prod', 'eu/team', 'fleet', 'prod/eu', 'team', 'fleet'], ['prod', 'eu', 'team/fleet', 'prod', 'eu/team', 'fleet']] })
  })
})

describe('hub memory', () => {
  test('a held item, with the Git document text cached for it, takes a few times its JSON, not nineteen', () => {
    const n = 5_000
    const items = makeItems(n)
    const bodies = items.map((item, i) => JSON.stringify(added(i + 1, item).body))
    const json = items.reduce((sum, item) => sum + canonicalJson(item).length, 0) / n
    const perItem = heapPerElement(n, () => {
      const state: FleetState = {}
      bodies.forEach((body, i) => applyMessage(state, 'kollect', ALLOWED, { subject: 'kollect.east.team-a.fleet.added', seq: i + 1, time: '', body: JSON.parse(body) }))
      const held = state['east/team-a/fleet'] as HeldInventory
      return { state, text: renderSnapshot(snapshotOf(held)).length }
    })
    // Measured: 1,350 bytes of held item and 1,930 of cached text, 3.8 times the JSON; 11 before
    // the text was kept flat and the strings shared.
    assert.ok(perItem <= 5 * json, `${perItem.toFixed(0)} bytes per held item, ${json.toFixed(0)} of JSON`)
  })
})

describe('hub config', () => {
  test('reports every problem at once; hub sinks are git or postgres', () => {
    assert.throws(
      () => parseHubConfig('nats: {}\nclusters: []\nsinks:\n  - name: Bad_Name\n    spec: { type: nats, nats: { url: nats://x:4222 } }\n'),
      (err: Error) => /nats\.url is required/.test(err.message) && /clusters must list/.test(err.message) &&
        /sinks\[0\]\.name must be a DNS label/.test(err.message) && /sinks\[0\]\.spec\.type must be git or postgres/.test(err.message),
    )
  })
  test('a cluster label with "/" (or anything the KollectSink cluster pattern refuses) is refused, in one line', () => {
    const config = (clusters: string) => `nats: { url: "nats://hub:4222" }\nclusters: ${clusters}\nsinks:\n  - name: fleet-git\n    spec: { type: git, git: { url: "https://git.example.com/fleet.git" } }\n`
    assert.throws(() => parseHubConfig(config('[prod, prod/eu]'), 'hub.yaml'), (err: Error) => {
      assert.equal(err.message, 'hub config hub.yaml: clusters[1]: "prod/eu" is not a cluster label: at most 63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit')
      return true
    })
    for (const bad of ['[""]', '["-east"]', '["east "]', '[42]', `[${'a'.repeat(64)}]`]) {
      assert.throws(() => parseHubConfig(config(bad)), (err: Error) => /^hub config hub\.yaml: clusters\[0\]: .* is not a cluster label: [^\n]*$/.test(err.message), bad)
    }
    assert.deepEqual(parseHubConfig(config('[lab-west, Prod_EU.1]')).clusters, ['lab-west', 'Prod_EU.1'])
  })

  test('fills the defaults', () => {
    const config = parseHubConfig('nats: { url: "nats://hub:4222" }\nclusters: [east]\nsinks:\n  - name: fleet-git\n    spec: { type: git, git: { url: "https://git.example.com/fleet.git" } }\n')
    assert.deepEqual(config.nats, { url: 'nats://hub:4222', stream: 'KOLLECT', subject: 'kollect', durable: 'kollect-hub', ackWaitSeconds: 600 })
    assert.equal(config.dataDir, '/data')
  })
})
