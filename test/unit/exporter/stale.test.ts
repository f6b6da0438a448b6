import { test } from 'node:test'
import assert from 'node:assert/strict'
import { itemKey } from '../../../api/canonical.js'
import type { Item, TargetReport } from '../../../api/types.js'
import { isStaleItem, isStaleReport, type ReportStamp } from '../../../exporter/report-order.js'
import { bumpReplicas } from '../../support/items.js'
import { composition, expected, harness, itemsOf, LIMIT, report, T1 } from './harness.js'

// Issue 16, finding 2: a report older than the one the exporter holds must never replace it.

const UID = 'uid-t1'

test('isStaleReport: same uid and (generation, sequence) lower is stale; anything unordered is not', () => {
  const held: ReportStamp = { uid: UID, generation: 5, sequence: 2000 }
  const cases: { reason: string; held: ReportStamp | undefined; report: ReportStamp; stale: boolean }[] = [
    { reason: 'a lower generation is stale, whatever its sequence', held, report: { uid: UID, generation: 4, sequence: 9000 }, stale: true },
    { reason: 'the same generation from an earlier sync is stale', held, report: { uid: UID, generation: 5, sequence: 1999 }, stale: true },
    { reason: 'the same generation from a later sync is newer', held, report: { uid: UID, generation: 5, sequence: 2001 }, stale: false },
    { reason: 'the same stamp again (a resent report) is not older', held, report: { uid: UID, generation: 5, sequence: 2000 }, stale: false },
    { reason: 'a higher generation is newer, even with an earlier sequence (a skewed replica)', held, report: { uid: UID, generation: 6, sequence: 1 }, stale: false },
    { reason: 'a new uid is a recreated target: never stale against the old one', held, report: { uid: 'uid-new', generation: 1, sequence: 1 }, stale: false },
    { reason: 'nothing held: nothing to be older than', held: undefined, report: { uid: UID, generation: 1, sequence: 1 }, stale: false },
    { reason: 'a report from a hooks replica before issue 16 (no uid, no sequence) is accepted as before', held, report: { generation: 1 }, stale: false },
    { reason: 'a report with a uid but no sequence has no order', held, report: { uid: UID, generation: 1 }, stale: false },
    { reason: 'held from an old replica (no stamp): the first stamped report is accepted', held: { generation: 9 }, report: { uid: UID, generation: 1, sequence: 1 }, stale: false },
  ]
  for (const c of cases) assert.equal(isStaleReport(c.held, c.report), c.stale, c.reason)
})

test('isStaleItem: only a lower metadata.generation on both sides', () => {
  assert.equal(isStaleItem(4, 3), true)
  assert.equal(isStaleItem(4, 4), false)
  assert.equal(isStaleItem(4, 5), false)
  assert.equal(isStaleItem(undefined, 3), false, 'the held item had no generation')
  assert.equal(isStaleItem(4, null), false, 'the object has no generation')
  assert.equal(isStaleItem(4, undefined), false, 'an old-style report')
})

function stamped(items: Item[], generation: number, sequence: number, extra: Partial<TargetReport> = {}): TargetReport {
  return { ...report(T1, items, [], generation), uid: UID, sequence, itemGenerations: items.map(() => 1), ...extra }
}

test('reportTarget: generation 4 after 5 is dropped, nothing changes, and the result names the held report', LIMIT, async (t) => {
  const { clock, factory, exporter, logs } = harness(t)
  await exporter.applyInventory(composition({ debounceMs: 1_000 }))
  const sink = factory.sink('team-a/primary')
  const [a] = itemsOf(T1, 1)
  assert.ok(a)
  const five = stamped([bumpReplicas(a, 5)], 5, 1000)
  assert.deepEqual(await exporter.reportTarget(five), { accepted: true })
  clock.advance(1_000)
  await exporter.idle()

  assert.deepEqual(await exporter.reportTarget(stamped([bumpReplicas(a, 4)], 4, 2000)), {
    accepted: false,
    reason: 'Stale',
    message: 'the exporter holds a report of generation 5; this one, of generation 4, was dropped as stale',
    heldGeneration: 5,
    heldChecksum: five.checksum,
  })
  assert.equal(exporter.inventoryState(composition().inventory)?.pending, undefined, 'a dropped report marks nothing dirty')
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(sink.checksums, [expected([bumpReplicas(a, 5)]).checksum])
  // The sequences are in the log (status may not carry them).
  assert.deepEqual(logs.find((l) => l.msg.startsWith('target report dropped'))?.fields, { target: 'team-a/t1', generation: 4, sequence: 2000, heldGeneration: 5, heldSequence: 1000 })
})

test('reportTarget: the same generation from an earlier sync is dropped; a later one is accepted', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ debounceMs: 1_000 }))
  const sink = factory.sink('team-a/primary')
  const [a] = itemsOf(T1, 1)
  assert.ok(a)
  const v700 = bumpReplicas(a, 700)
  const newer = stamped([v700], 5, 2000)
  await exporter.reportTarget(newer)
  const older = await exporter.reportTarget(stamped([bumpReplicas(a, 699)], 5, 1000))
  assert.deepEqual(older, {
    accepted: false,
    reason: 'Stale',
    message: 'the exporter holds a later report of generation 5; this one, of the same generation but an earlier sync, was dropped as stale',
    heldGeneration: 5,
    heldChecksum: newer.checksum,
  })
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(sink.lastWrite?.snapshot, expected([v700]))

  const v701 = bumpReplicas(a, 701)
  assert.deepEqual(await exporter.reportTarget(stamped([v701], 5, 2001)), { accepted: true })
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(sink.lastWrite?.snapshot, expected([v701]))
})

test('reportTarget: a recreated target (new uid) at generation 1 replaces the old one\'s generation 5', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ debounceMs: 1_000 }))
  const sink = factory.sink('team-a/primary')
  const [a, b] = itemsOf(T1, 2)
  assert.ok(a && b)
  await exporter.reportTarget(stamped([a], 5, 2000))
  assert.deepEqual(await exporter.reportTarget(stamped([b], 1, 1000, { uid: 'uid-t1-recreated' })), { accepted: true })
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(sink.lastWrite?.snapshot, expected([b]))
  // ...and from then on the new uid's stamp orders reports.
  assert.equal((await exporter.reportTarget(stamped([a], 1, 999, { uid: 'uid-t1-recreated' }))).accepted, false)
})

test('reportTarget: an item whose object generation went back keeps the held item (counted); others update', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ debounceMs: 1_000 }))
  const sink = factory.sink('team-a/primary')
  const [a, b, c] = itemsOf(T1, 3)
  assert.ok(a && b && c)
  await exporter.reportTarget(stamped([a, b, c], 1, 1000, { itemGenerations: [7, 3, null] }))
  const a2 = bumpReplicas(a, 20)
  const b2 = bumpReplicas(b, 30)
  const c2 = bumpReplicas(c, 40)
  // a: generation 6 < 7, kept at 7. b: 4 > 3, updated. c: no generation on either side, updated.
  assert.deepEqual(await exporter.reportTarget(stamped([a2, b2, c2], 1, 2000, { itemGenerations: [6, 4, null] })), { accepted: true, staleItems: 1 })
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(sink.lastWrite?.snapshot, expected([a, b2, c2]))
  // The kept item keeps generation 7: generation 6 again is still older; 7 replaces it.
  assert.deepEqual(await exporter.reportTarget(stamped([a2, b2, c2], 1, 3000, { itemGenerations: [6, 4, null] })), { accepted: true, staleItems: 1 })
  assert.deepEqual(await exporter.reportTarget(stamped([a2, b2, c2], 1, 4000, { itemGenerations: [7, 4, null] })), { accepted: true })
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(sink.lastWrite?.snapshot, expected([a2, b2, c2]))
})

test('reportTarget: an item kept through failedKeys keeps its generation for the next comparison', LIMIT, async (t) => {
  const { exporter } = harness(t)
  await exporter.applyInventory(composition({ debounceMs: 1_000 }))
  const [a] = itemsOf(T1, 1)
  assert.ok(a)
  await exporter.reportTarget(stamped([a], 1, 1000, { itemGenerations: [7] }))
  // Extraction failed for a: it stays held, with generation 7.
  await exporter.reportTarget({ ...stamped([], 1, 2000), failedKeys: [itemKey(a)] })
  assert.deepEqual(await exporter.reportTarget(stamped([bumpReplicas(a, 9)], 1, 4000, { itemGenerations: [6] })), { accepted: true, staleItems: 1 })
})

test('reportTarget: reports without uid, sequence or itemGenerations (hooks before issue 16) are accepted as before', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ debounceMs: 1_000 }))
  const sink = factory.sink('team-a/primary')
  const [a] = itemsOf(T1, 1)
  assert.ok(a)
  await exporter.reportTarget(stamped([bumpReplicas(a, 5)], 5, 2000, { itemGenerations: [9] }))
  const old = bumpReplicas(a, 4)
  assert.deepEqual(await exporter.reportTarget(report(T1, [old], [], 4)), { accepted: true })
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(sink.lastWrite?.snapshot, expected([old]))
})

test('reportTarget: a sync still in flight when its target was finalized cannot bring the target back; a recreated one can', LIMIT, async (t) => {
  const { exporter } = harness(t)
  const [a] = itemsOf(T1, 1)
  assert.ok(a)
  assert.deepEqual(await exporter.reportTarget(stamped([a], 3, 1000)), { accepted: true })
  await exporter.removeTarget({ ...T1, uid: UID })
  const late = await exporter.reportTarget(stamped([a], 3, 900))
  assert.equal(late.accepted, false)
  assert.equal(late.accepted === false && late.reason, 'Stale')
  const state = await exporter.applyInventory(composition())
  assert.deepEqual(state.missingTargets, [T1], 'the exporter does not hold the finalized target again')
  assert.deepEqual(await exporter.reportTarget(stamped([a], 1, 5000, { uid: 'uid-recreated' })), { accepted: true }, 'the same name with a new uid is a new target')
})
