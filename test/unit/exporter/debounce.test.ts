import { test } from 'node:test'
import assert from 'node:assert/strict'
import { bumpReplicas } from '../../support/items.js'
import { composition, expected, harness, itemsOf, LIMIT, report, resolvedSink, T1 } from './harness.js'

test('debounce: one report is exported exactly `debounce` ms after it, not before', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ debounceMs: 2_000, maxWaitMs: 60_000 }))
  // Let the timer armed by applyInventory run into the completeness gate first.
  clock.advance(120_000)
  await exporter.idle()
  const sink = factory.sink('team-a/primary')
  assert.equal(sink.attempts.length, 0, 'nothing is exported before the target reports')

  const items = itemsOf(T1, 3)
  const reportedAt = clock.now()
  await exporter.reportTarget(report(T1, items))
  clock.advance(1_999)
  await exporter.idle()
  assert.equal(sink.attempts.length, 0, 'no write 1 ms before the debounce elapses')

  clock.advance(1)
  await exporter.idle()
  assert.equal(sink.writes.length, 1, 'exactly one write when the debounce elapses')
  assert.equal(sink.writes[0]?.at, reportedAt + 2_000)
  assert.equal(sink.writes[0]?.checksum, expected(items).checksum)
  assert.deepEqual(sink.writes[0]?.snapshot, expected(items))

  clock.advance(120_000)
  await exporter.idle()
  assert.equal(sink.attempts.length, 1, 'no further writes without further changes')
})

test('debounce: a burst of 1,000 reports 10 ms apart is one write per sink, with the last state', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({
    debounceMs: 2_000,
    maxWaitMs: 60_000,
    sinks: [resolvedSink('primary'), resolvedSink('secondary', { type: 'file' })],
  }))
  const base = itemsOf(T1, 5)
  let last = base
  for (let k = 0; k < 1_000; k++) {
    if (k > 0) clock.advance(10)
    last = [bumpReplicas(base[0]!, 100 + k), ...base.slice(1)]
    await exporter.reportTarget(report(T1, last))
  }
  clock.advance(1_999)
  await exporter.idle()
  const primary = factory.sink('team-a/primary')
  const secondary = factory.sink('team-a/secondary')
  assert.equal(primary.attempts.length + secondary.attempts.length, 0, 'nothing during the burst or before the quiet period ends')

  clock.advance(1)
  await exporter.idle()
  clock.advance(120_000)
  await exporter.idle()
  for (const sink of [primary, secondary]) {
    assert.equal(sink.attempts.length, 1, `${sink.id}: exactly one write for the whole burst`)
    assert.equal(sink.writes[0]?.checksum, expected(last).checksum, `${sink.id}: the write holds the last state`)
    const first = sink.writes[0]?.snapshot.items.find((i) => i.uid === base[0]!.uid)
    assert.equal(first?.attributes['replicas'], 1_099)
  }
})

test('debounce: maxWait forces a write 5 s after the first change despite updates every 500 ms', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ debounceMs: 2_000, maxWaitMs: 5_000 }))
  clock.advance(10_000) // the gate swallows the apply-time timer
  await exporter.idle()
  const sink = factory.sink('team-a/primary')
  const base = itemsOf(T1, 2)
  const t0 = clock.now()
  const states: ReturnType<typeof itemsOf>[] = []
  const push = async (k: number): Promise<void> => {
    const items = [bumpReplicas(base[0]!, k), base[1]!]
    states.push(items)
    await exporter.reportTarget(report(T1, items))
  }

  await push(0) // t0
  for (let k = 1; k <= 9; k++) {
    clock.advance(500)
    await push(k) // t0 + 500k
  }
  clock.advance(499) // t0 + 4999
  await exporter.idle()
  assert.equal(sink.attempts.length, 0, 'no write before maxWait')

  clock.advance(1) // t0 + 5000
  await exporter.idle()
  assert.equal(sink.writes.length, 1, 'a write at maxWait after the first change')
  assert.equal(sink.writes[0]?.at, t0 + 5_000)
  assert.equal(sink.writes[0]?.checksum, expected(states[9]!).checksum, 'the forced write holds the state at that moment')

  // Updates keep coming: the next window starts with the next change, and is forced again.
  for (let k = 10; k <= 19; k++) {
    await push(k) // t0 + 5000 + 500(k-10)
    clock.advance(500)
  }
  // now t0 + 10000: the window that opened at t0 + 5000 is due
  await exporter.idle()
  assert.equal(sink.writes.length, 2)
  assert.equal(sink.writes[1]?.at, t0 + 10_000)
  assert.equal(sink.writes[1]?.checksum, expected(states[19]!).checksum)
})

test('debounce: an unchanged checksum after an export writes nothing', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ debounceMs: 2_000 }))
  const items = itemsOf(T1, 4)
  await exporter.reportTarget(report(T1, items))
  clock.advance(2_000)
  await exporter.idle()
  const sink = factory.sink('team-a/primary')
  assert.equal(sink.writes.length, 1)

  // Same items again, also in another order (the snapshot sorts them), several times.
  await exporter.reportTarget(report(T1, items))
  clock.advance(500)
  await exporter.reportTarget(report(T1, [...items].reverse()))
  clock.advance(60_000)
  await exporter.idle()
  assert.equal(sink.attempts.length, 1, 'no new write for an unchanged checksum')
  const state = exporter.inventoryState(composition().inventory)
  assert.equal(state?.sinks[0]?.state, 'Synced')
  assert.equal(state?.checksum, expected(items).checksum)

  // A real change is still exported.
  const changed = [bumpReplicas(items[0]!, 42), ...items.slice(1)]
  await exporter.reportTarget(report(T1, changed))
  clock.advance(2_000)
  await exporter.idle()
  assert.deepEqual(sink.checksums, [expected(items).checksum, expected(changed).checksum])
})

test('flush exports an armed debounce at once; close closes each sink once and stops exports', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ debounceMs: 2_000 }))
  const items = itemsOf(T1, 2)
  await exporter.reportTarget(report(T1, items))
  exporter.flush()
  await exporter.idle()
  const sink = factory.sink('team-a/primary')
  assert.deepEqual(sink.checksums, [expected(items).checksum], 'flush writes without waiting for the debounce')
  clock.advance(10_000)
  await exporter.idle()
  assert.equal(sink.attempts.length, 1, 'the flushed debounce does not fire again')

  await exporter.close()
  assert.equal(sink.closeCount, 1)
  await exporter.reportTarget(report(T1, itemsOf(T1, 3)))
  clock.advance(120_000)
  await exporter.idle()
  assert.equal(sink.attempts.length, 1, 'nothing is exported after close')
})
