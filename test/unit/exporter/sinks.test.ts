import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { ObjectRef } from '../../../api/types.js'
import { DEFAULT_SINK } from '../../../exporter/index.js'
import { composition, eventually, expected, harness, INV, itemsOf, LIMIT, report, resolvedSink, settle, T1, T2 } from './harness.js'

const INV2: ObjectRef = { namespace: 'team-a', name: 'staging' }

test('sink spec change: a new Sink instance is created, the old one closed, and the new one written', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  const v1 = resolvedSink('primary', { postgres: { table: 'inventory_v1' } })
  const v2 = resolvedSink('primary', { postgres: { table: 'inventory_v2' } })
  await exporter.applyInventory(composition({ sinks: [v1], debounceMs: 1_000 }))
  const items = itemsOf(T1, 3)
  await exporter.reportTarget(report(T1, items))
  clock.advance(1_000)
  await exporter.idle()
  const old = factory.sink('team-a/primary')
  assert.equal(old.writes.length, 1)

  // The same composition again, or a change that does not touch the sink: same instance.
  await exporter.applyInventory(composition({ sinks: [v1], debounceMs: 1_000 }))
  await exporter.applyInventory(composition({ sinks: [resolvedSink('primary', { postgres: { table: 'inventory_v1' } })], debounceMs: 1_500 }))
  await settle()
  assert.equal(factory.calls.length, 1, 'an unchanged sink spec keeps its Sink')
  assert.equal(old.closeCount, 0)

  await exporter.applyInventory(composition({ sinks: [v2], debounceMs: 1_000 }))
  assert.equal(factory.calls.length, 2, 'a changed spec creates a new Sink')
  assert.deepEqual(factory.calls[1], v2, 'created from the new spec')
  const fresh = factory.sink('team-a/primary')
  assert.notEqual(fresh, old)
  await eventually(() => old.closeCount === 1, 'the old Sink closed')

  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(fresh.checksums, [expected(items).checksum], 'the new Sink receives the current snapshot')
  assert.equal(old.attempts.length, 1, 'the old Sink is not written again')
  assert.equal(exporter.inventoryState(INV)?.sinks[0]?.state, 'Synced')
  assert.equal(old.closeCount, 1, 'closed exactly once')
})

test('a sink dropped from the composition is closed and no longer written', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ sinks: [resolvedSink('a'), resolvedSink('b')], debounceMs: 1_000 }))
  await exporter.reportTarget(report(T1, itemsOf(T1, 1)))
  clock.advance(1_000)
  await exporter.idle()
  const b = factory.sink('team-a/b')
  assert.equal(b.writes.length, 1)

  const state = await exporter.applyInventory(composition({ sinks: [resolvedSink('a')], debounceMs: 1_000 }))
  assert.deepEqual(state.sinks.map((s) => s.name), ['a'])
  await eventually(() => b.closeCount === 1, 'the dropped Sink closed')
  await exporter.reportTarget(report(T1, itemsOf(T1, 2)))
  clock.advance(1_000)
  await exporter.idle()
  assert.equal(factory.sink('team-a/a').writes.length, 2)
  assert.equal(b.attempts.length, 1)
})

test('two inventories sharing one sink use one Sink instance, closed when the last one lets go', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  const shared = resolvedSink('shared', { type: 'nats', nats: { url: 'nats://nats.example:4222' } })
  const a = composition({ inventory: INV, targets: [T1], sinks: [shared], debounceMs: 1_000 })
  const b = composition({ inventory: INV2, targets: [T2], sinks: [{ ...shared, spec: { ...shared.spec } }], debounceMs: 1_000 })
  await exporter.applyInventory(a)
  await exporter.applyInventory(b)
  assert.equal(factory.calls.length, 1, 'createSink is called once for the shared sink')

  const itemsA = itemsOf(T1, 2)
  const itemsB = itemsOf(T2, 3, 100)
  await exporter.reportTarget(report(T1, itemsA))
  await exporter.reportTarget(report(T2, itemsB))
  clock.advance(1_000)
  await exporter.idle()
  const sink = factory.sink('team-a/shared')
  assert.deepEqual(
    sink.writes.map((w) => [w.inventory.name, w.checksum]).sort(),
    [[INV.name, expected(itemsA, INV).checksum], [INV2.name, expected(itemsB, INV2).checksum]].sort(),
    'both inventories write through the one instance',
  )

  assert.equal((await exporter.finalizeInventory(a)).finalized, true)
  await settle()
  assert.equal(sink.closeCount, 0, 'still in use by the other inventory')
  assert.equal(exporter.inventoryState(INV2)?.sinks[0]?.state, 'Synced')

  await exporter.reportTarget(report(T2, itemsOf(T2, 1, 100)))
  clock.advance(1_000)
  await exporter.idle()
  assert.equal(sink.writes.length, 3, 'the remaining inventory still writes through it')

  assert.equal((await exporter.finalizeInventory(b)).finalized, true)
  await eventually(() => sink.closeCount === 1, 'the shared Sink closed after its last inventory')
  assert.equal(factory.calls.length, 1)
})

test('inventories without sinkRefs share the embedded default sink', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ inventory: INV, sinks: [], debounceMs: 1_000 }))
  await exporter.applyInventory(composition({ inventory: INV2, sinks: [], debounceMs: 1_000 }))
  assert.deepEqual(factory.calls, [null], 'createSink(null) once: the embedded default')
  await exporter.reportTarget(report(T1, itemsOf(T1, 1)))
  clock.advance(1_000)
  await exporter.idle()
  assert.equal(factory.sink('embedded/default').writes.length, 2)
  const state = exporter.inventoryState(INV)
  assert.deepEqual(state?.sinks.map((s) => ({ namespace: s.namespace, name: s.name })), [DEFAULT_SINK])
})

test('sink spec change while the old Sink is retrying: the old one gets no more attempts', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ sinks: [resolvedSink('primary', { postgres: { table: 'a' } })], debounceMs: 1_000 }))
  const old = factory.sink('team-a/primary')
  old.failNextWrites(Number.POSITIVE_INFINITY)
  const items = itemsOf(T1, 2)
  await exporter.reportTarget(report(T1, items))
  clock.advance(1_000)
  await eventually(() => old.attempts.length >= 2, 'the old Sink retrying')

  await exporter.applyInventory(composition({ sinks: [resolvedSink('primary', { postgres: { table: 'b' } })], debounceMs: 1_000 }))
  const fresh = factory.sink('team-a/primary')
  assert.notEqual(fresh, old)
  clock.advance(1_000)
  await exporter.idle()
  const attemptsAfterChange = old.attempts.length
  old.failNextWrites(0)
  await new Promise((r) => setTimeout(r, 30))
  await exporter.idle()
  assert.equal(old.attempts.length, attemptsAfterChange, 'the old writer stopped')
  assert.equal(old.writes.length, 0)
  assert.deepEqual(fresh.checksums, [expected(items).checksum])
  assert.equal(exporter.inventoryState(INV)?.sinks[0]?.state, 'Synced')
})

test('a Sink whose creation fails (missing secret) shows Failing, is created again, and then written', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  factory.failNextCreates(Number.POSITIVE_INFINITY)
  await exporter.applyInventory(composition({ sinks: [resolvedSink('primary'), resolvedSink('other')], debounceMs: 1_000 }))
  const items = itemsOf(T1, 2)
  await exporter.reportTarget(report(T1, items))
  clock.advance(1_000)
  await eventually(() => factory.calls.length >= 6, 'createSink tried again for both sinks')
  assert.equal(factory.created.length, 0)
  const failing = exporter.inventoryState(INV)
  for (const s of failing?.sinks ?? []) {
    assert.equal(s.state, 'Failing', s.name)
    assert.equal(s.message, factory.creationError, s.name)
  }

  factory.failNextCreates(0)
  await exporter.idle()
  assert.equal(factory.all('team-a/primary').length, 1, 'one instance once creation succeeds')
  assert.equal(factory.all('team-a/other').length, 1)
  assert.deepEqual(factory.sink('team-a/primary').checksums, [expected(items).checksum])
  assert.deepEqual(factory.sink('team-a/other').checksums, [expected(items).checksum])
  assert.ok(exporter.inventoryState(INV)?.sinks.every((s) => s.state === 'Synced' && s.message === ''))

  // The recovered instance is kept: later exports do not create another one.
  const calls = factory.calls.length
  await exporter.reportTarget(report(T1, itemsOf(T1, 3)))
  clock.advance(1_000)
  await exporter.idle()
  assert.equal(factory.calls.length, calls)
  assert.equal(factory.sink('team-a/primary').writes.length, 2)
})
