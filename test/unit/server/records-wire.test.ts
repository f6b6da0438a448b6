import assert from 'node:assert/strict'
import { test } from 'node:test'
import { canonicalJson, sha256 } from '../../../api/canonical.js'
import { heldReport } from '../../../api/report.js'
import type { Item } from '../../../api/types.js'
import { syncTarget } from '../../../hooks/target.js'
import type { ObjectRecord, Tallied } from '../../../hooks/target-tally.js'
import { decodeRecords, encodeRecords } from '../../../server/extraction/records-wire.js'
import { deployment, loadExampleCr, targetSyncRequest } from '../../support/metacontroller.js'

// What an extraction child sends along with a target report (its records, and its items' places
// in the report's text), and what the server reads back without parsing the report.

/** A record sink as the child's: each object's record in order, and the tally. */
function collector() {
  const records: [string, ObjectRecord<Item>][] = []
  const sink = { tallied: null as Tallied<Item> | null, add: (key: string, record: ObjectRecord<Item>) => void records.push([key, record]), complete: (t: Tallied<Item>) => { sink.tallied = t } }
  return { records, sink }
}

test('the report is the report\'s JSON with each item as its canonical JSON, and the records read back give each item its text, hash, generation and identity', () => {
  const objects = Array.from({ length: 40 }, (_, i) => deployment(i, i % 4 === 0 ? { namespace: 'team-a-canary' } : {}))
  // Text past ASCII, where bytes and characters part: the places are in characters of the decoded text.
  for (const [i, o] of objects.entries()) {
    ;(o.metadata as { labels: Record<string, string> }).labels['note'] = i % 3 === 0 ? 'é中😀' : 'plain'
    ;(o as { spec: { replicas: number } }).spec.replicas = 1 + (i % 7)
  }
  const profile = structuredClone(loadExampleCr('profile-deployments.yaml')) as { spec: { attributes: Record<string, unknown>[] } }
  profile.spec.attributes.push({ name: 'note', cel: "object.metadata.labels['note']" })
  profile.spec.attributes.push({ name: 'odd', cel: 'object.spec.replicas == 2 ? 1 / 0 : 1' })
  // A map whose keys do not come sorted: JSON.stringify and canonical JSON write it differently.
  profile.spec.attributes.push({ name: 'unsorted', cel: '{"z": 1, "a": object.metadata.name}', type: 'object' })
  const { records, sink } = collector()
  const { report } = syncTarget(targetSyncRequest(objects, { profile: profile as never }) as never, { plural: { plural: 'deployments', source: 'spec' }, records: sink })
  assert.ok(report && sink.tallied)
  const wire = encodeRecords(heldReport(report), records, sink.tallied)
  assert.notEqual(wire.report, JSON.stringify(report), 'the items are not written as JSON.stringify writes them')
  assert.deepEqual(JSON.parse(wire.report), JSON.parse(JSON.stringify(report)))
  for (const item of report.items) assert.ok(wire.report.includes(canonicalJson(item)), 'each item as its canonical JSON')
  assert.ok(wire.report.includes('é中😀'), 'items past ASCII in the report')

  const read = decodeRecords(Buffer.from(wire.meta), Buffer.from(wire.report))
  assert.ok(read)
  assert.deepEqual(read.failedKeys, report.failedKeys)
  assert.equal(read.records.size, records.length)
  for (const [key, record] of records) {
    const got = read.records.get(key)
    assert.equal(got?.matched, record.matched, key)
    assert.equal(got?.failure, record.failure, key)
    assert.equal(got?.failedKey, record.failedKey, key)
    if (!record.item) {
      assert.equal(got?.item, undefined, key)
      continue
    }
    // The text the item's hash was taken of.
    assert.equal(got?.item?.value, canonicalJson(record.item.value), key)
    assert.equal(sha256(got?.item?.value ?? ''), record.item.hash, key)
    assert.deepEqual({ ...got?.item, value: undefined, json: undefined }, { ...record.item, value: undefined, json: undefined }, key)
  }
  assert.ok(records.some(([, r]) => r.failure), 'some objects failed')
})

test('records whose places do not hold an item are refused, not read as something else', () => {
  const { records, sink } = collector()
  const { report } = syncTarget(targetSyncRequest([deployment(1), deployment(2)]) as never, { plural: { plural: 'deployments', source: 'spec' }, records: sink })
  assert.ok(report && sink.tallied)
  const wire = encodeRecords(heldReport(report), records, sink.tallied)
  assert.ok(decodeRecords(Buffer.from(wire.meta), Buffer.from(wire.report)))
  // One character more in front: every place is off by one.
  assert.equal(decodeRecords(Buffer.from(wire.meta), Buffer.from(' ' + wire.report)), null)
})
