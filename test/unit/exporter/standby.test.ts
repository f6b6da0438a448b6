import { test } from 'node:test'
import assert from 'node:assert/strict'
import { composition, expected, harness, itemsOf, LIMIT, report, resolvedSink, T1, T2 } from './harness.js'

// Leader election's seam: a standby holds everything and writes nothing; setActive(true) exports
// at once (no debounce, no resync); setActive(false) stops the writers.

test('a standby holds reports and writes nothing, however long it waits, and says so', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t, { standby: true })
  const comp = composition({ debounceMs: 1_000 })
  await exporter.applyInventory(comp)
  await exporter.reportTarget(report(T1, itemsOf(T1, 3)))
  clock.advance(120_000)
  await exporter.idle()
  assert.equal(exporter.isActive, false)
  assert.equal(factory.sink('team-a/primary').attempts.length, 0, 'no write attempt')
  const finalized = await exporter.finalizeInventory(composition({ sinks: [resolvedSink('primary', { deletionPolicy: 'Delete' })] }))
  assert.equal(finalized.finalized, false, 'a standby does not finalize: the holder does')
  assert.equal(factory.sink('team-a/primary').removes.length, 0, 'nor delete anything')
})

test('taking over exports the held state at once, past the debounce, with no new report', LIMIT, async (t) => {
  const { factory, exporter } = harness(t, { standby: true })
  await exporter.applyInventory(composition({ debounceMs: 60_000 }))
  const items = itemsOf(T1, 3)
  await exporter.reportTarget(report(T1, items))
  exporter.setActive(true)
  await exporter.idle()
  assert.deepEqual(factory.sink('team-a/primary').checksums, [expected(items).checksum])
})

test('taking over keeps the completeness gate: a target not heard of yet holds the export', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t, { standby: true })
  await exporter.applyInventory(composition({ targets: [T1, T2], debounceMs: 1_000 }))
  await exporter.reportTarget(report(T1, itemsOf(T1, 2)))
  exporter.setActive(true)
  await exporter.idle()
  assert.equal(factory.sink('team-a/primary').attempts.length, 0, 'T2 has not reported')
  await exporter.reportTarget(report(T2, itemsOf(T2, 1)))
  clock.advance(1_000)
  await exporter.idle()
  assert.equal(factory.sink('team-a/primary').writes.length, 1)
})

test('losing the lease stops a retrying writer and later changes; regaining writes the newest state once', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ debounceMs: 1_000 }))
  await exporter.reportTarget(report(T1, itemsOf(T1, 1)))
  clock.advance(1_000)
  await exporter.idle()
  const sink = factory.sink('team-a/primary')
  assert.equal(sink.writes.length, 1)

  sink.failNextWrites(Infinity)
  await exporter.reportTarget(report(T1, itemsOf(T1, 2)))
  clock.advance(1_000)
  await new Promise((r) => setImmediate(r))
  exporter.setActive(false)
  const attempts = sink.attempts.length
  await exporter.reportTarget(report(T1, itemsOf(T1, 4)))
  clock.advance(60_000)
  await exporter.idle()
  assert.equal(sink.attempts.length, attempts, 'no attempt after the loss')
  assert.equal(exporter.pendingCount(), 0, 'nothing owed: the holder computes it')

  sink.failNextWrites(0)
  exporter.setActive(true)
  await exporter.idle()
  assert.equal(sink.writes.at(-1)?.checksum, expected(itemsOf(T1, 4)).checksum, 'the newest state, at once')
  assert.equal(sink.attempts.length, attempts + 1)
})

test('a finalized inventory is forgotten by the standby: taking over neither exports nor deletes it', LIMIT, async (t) => {
  const { factory, exporter } = harness(t, { standby: true })
  const comp = composition({ debounceMs: 1_000, sinks: [resolvedSink('primary', { deletionPolicy: 'Delete' })] })
  await exporter.applyInventory(comp)
  await exporter.reportTarget(report(T1, itemsOf(T1, 3)))
  assert.equal((await exporter.finalizeInventory(comp)).finalized, false, 'the holder answers for the finalize')
  assert.equal(exporter.inventoryState(comp.inventory), null, 'the standby dropped it')
  exporter.setActive(true)
  await exporter.idle()
  assert.equal(factory.sink('team-a/primary').attempts.length, 0, 'a deleted inventory is not exported back')
  assert.equal(factory.sink('team-a/primary').removes.length, 0, 'the standby ran no Delete, and the takeover runs none either')
  // A finalize retry that reaches the new holder runs the Delete policy from the request.
  assert.equal((await exporter.finalizeInventory(comp)).finalized, true)
  assert.equal(factory.sink('team-a/primary').removes.length, 1)
})
