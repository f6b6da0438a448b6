import { test } from 'node:test'
import assert from 'node:assert/strict'
import { itemKey } from '../../../api/canonical.js'
import { bumpReplicas } from '../../support/items.js'
import { composition, expected, harness, INV, itemsOf, keysOf, LIMIT, report, T1, T2 } from './harness.js'

test('failedKeys: an item whose extraction failed keeps its previous version in the next snapshot', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ debounceMs: 1_000 }))
  const sink = factory.sink('team-a/primary')
  const [a, b, c] = itemsOf(T1, 3)
  assert.ok(a && b && c)
  await exporter.reportTarget(report(T1, [a, b, c]))
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(sink.checksums, [expected([a, b, c]).checksum])

  // b failed to extract this time; a changed; c is gone.
  const a2 = bumpReplicas(a, 11)
  await exporter.reportTarget(report(T1, [a2], [itemKey(b)]))
  clock.advance(1_000)
  await exporter.idle()
  assert.equal(sink.writes.length, 2)
  const second = sink.writes[1]!.snapshot
  assert.deepEqual(second, expected([a2, b]), 'b is kept as it was, a is updated, c is removed')
  assert.deepEqual(second.items.find((i) => i.uid === b.uid), b)

  // Failing again keeps the kept item; a key never seen before adds nothing.
  const never = itemsOf(T1, 1, 900)[0]!
  await exporter.reportTarget(report(T1, [a2, c], [itemKey(b), itemKey(never)]))
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(sink.lastWrite?.snapshot, expected([a2, b, c]))

  // A successful extraction replaces it; without the key it disappears.
  const b2 = bumpReplicas(b, 22)
  await exporter.reportTarget(report(T1, [a2, b2], []))
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(sink.lastWrite?.snapshot, expected([a2, b2]))
  await exporter.reportTarget(report(T1, [a2], []))
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(keysOf(sink.lastWrite!.snapshot.items), keysOf([a2]))
  assert.equal(sink.writes.length, 5)
})

test('removeTarget: the removed target\'s items disappear from the next export', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ targets: [T1, T2], debounceMs: 1_000 }))
  const sink = factory.sink('team-a/primary')
  const items1 = itemsOf(T1, 2)
  const items2 = itemsOf(T2, 3, 100)
  await exporter.reportTarget(report(T1, items1))
  await exporter.reportTarget(report(T2, items2))
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(sink.checksums, [expected([...items1, ...items2]).checksum])

  // The KollectTarget is deleted: its finalize hook removes it, the inventory re-syncs without it.
  await exporter.removeTarget(T2)
  clock.advance(60_000)
  await exporter.idle()
  assert.equal(sink.attempts.length, 1, 'while the composition still names T2, the gate holds (no partial export)')
  assert.deepEqual(exporter.inventoryState(INV)?.missingTargets, [T2])

  const state = await exporter.applyInventory(composition({ targets: [T1], debounceMs: 1_000 }))
  assert.equal(state.complete, true)
  clock.advance(1_000)
  await exporter.idle()
  assert.equal(sink.writes.length, 2)
  assert.deepEqual(sink.lastWrite?.snapshot, expected(items1), 'only T1\'s items remain')
  assert.equal(exporter.inventoryState(INV)?.itemCount, 2)
})

test('removeTarget: removing a target the inventory no longer names triggers nothing; re-adding it needs a new report', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ targets: [T1, T2], debounceMs: 1_000 }))
  const sink = factory.sink('team-a/primary')
  const items1 = itemsOf(T1, 2)
  await exporter.reportTarget(report(T1, items1))
  await exporter.reportTarget(report(T2, itemsOf(T2, 1, 100)))
  clock.advance(1_000)
  await exporter.idle()

  // The inventory sync arrives first, then the target's finalize.
  await exporter.applyInventory(composition({ targets: [T1], debounceMs: 1_000 }))
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(sink.lastWrite?.snapshot, expected(items1))
  await exporter.removeTarget(T2)
  await exporter.removeTarget({ namespace: 'team-a', name: 'never-reported' })
  clock.advance(60_000)
  await exporter.idle()
  assert.equal(sink.attempts.length, 2)

  // Naming T2 again: its old items are gone, so the gate waits for a fresh report.
  const again = await exporter.applyInventory(composition({ targets: [T1, T2], debounceMs: 1_000 }))
  assert.deepEqual(again.missingTargets, [T2])
  clock.advance(60_000)
  await exporter.idle()
  assert.equal(sink.attempts.length, 2)
})

test('a report of changes applies to the report it names: the same snapshot as the whole report, and BaseMismatch otherwise', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ debounceMs: 1_000 }))
  const sink = factory.sink('team-a/primary')
  const [a, b, c, d] = itemsOf(T1, 4)
  assert.ok(a && b && c && d)
  const first = { ...report(T1, [a, b, c]), uid: 'u1' }
  await exporter.reportTarget(first)

  // b changed, c is gone, d is new; a failed this time and keeps its item.
  const b2 = bumpReplicas(b, 7)
  const whole = { ...report(T1, [b2, d], [itemKey(a)]), uid: 'u1' }
  const changes = { ...whole, base: first.checksum, items: [b2, d], removedKeys: [itemKey(c)] }
  assert.deepEqual(await exporter.reportTarget({ ...changes, base: 'another' }), {
    accepted: false, reason: 'BaseMismatch',
    message: 'the exporter does not hold the report of checksum another that this report of changes applies to; send the whole report',
  })
  assert.equal((await exporter.reportTarget({ ...changes, uid: 'u2' })).accepted, false, 'another uid is another target')
  assert.deepEqual(await exporter.reportTarget(changes), { accepted: true })
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(sink.lastWrite?.snapshot, expected([a, b2, d]))
  assert.equal(await exporter.holdsReport({ target: T1, uid: 'u1', generation: 1, checksum: whole.checksum }), true)

  // The next change applies to that one: a is extracted again, nothing else moves.
  const next = { ...report(T1, [a, b2, d]), uid: 'u1' }
  assert.deepEqual(await exporter.reportTarget({ ...next, base: whole.checksum, items: [a], removedKeys: [] }), { accepted: true })
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(sink.lastWrite?.snapshot, expected([a, b2, d]))
})
