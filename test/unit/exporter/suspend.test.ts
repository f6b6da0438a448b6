import { test } from 'node:test'
import assert from 'node:assert/strict'
import { composition, expected, harness, INV, itemsOf, LIMIT, report, T1 } from './harness.js'

test('suspend: a suspended inventory exports nothing, however long and whatever changes', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  const state = await exporter.applyInventory(composition({ suspend: true, debounceMs: 1_000, maxWaitMs: 5_000 }))
  assert.equal(state.sinks[0]?.state, 'Pending')
  const sink = factory.sink('team-a/primary')
  for (let k = 1; k <= 5; k++) {
    await exporter.reportTarget(report(T1, itemsOf(T1, k)))
    clock.advance(1_000)
  }
  clock.advance(120_000)
  exporter.flush()
  await exporter.idle()
  assert.equal(sink.attempts.length, 0, 'nothing exported while suspended')
  const after = exporter.inventoryState(INV)
  assert.equal(after?.sinks[0]?.message, 'suspended')
  assert.equal(after?.sinks[0]?.state, 'Pending')

  // Resuming exports the current state.
  await exporter.applyInventory(composition({ suspend: false, debounceMs: 1_000, maxWaitMs: 5_000 }))
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(sink.checksums, [expected(itemsOf(T1, 5)).checksum])
})

test('suspend: suspending while a change is waiting for its debounce cancels that export', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ debounceMs: 2_000 }))
  const sink = factory.sink('team-a/primary')
  const before = itemsOf(T1, 2)
  await exporter.reportTarget(report(T1, before))
  clock.advance(2_000)
  await exporter.idle()
  assert.equal(sink.writes.length, 1)

  await exporter.reportTarget(report(T1, itemsOf(T1, 3))) // debounce armed: due in 2 s
  clock.advance(500)
  await exporter.applyInventory(composition({ debounceMs: 2_000, suspend: true }))
  clock.advance(60_000)
  await exporter.idle()
  assert.deepEqual(sink.checksums, [expected(before).checksum], 'no export after suspend: true')
})
