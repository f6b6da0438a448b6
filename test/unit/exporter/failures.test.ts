import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { InventoryExportState, SinkExportState } from '../../../api/types.js'
import { SinkError } from '../../../sinks/sink.js'
import { bumpReplicas } from '../../support/items.js'
import { composition, eventually, expected, harness, INV, itemsOf, LIMIT, report, resolvedSink, T1 } from './harness.js'

function sinkState(state: InventoryExportState | null, name: string): SinkExportState {
  const s = state?.sinks.find((x) => x.name === name)
  assert.ok(s, `sink ${name} in ${JSON.stringify(state)}`)
  return s
}

const TWO_SINKS = [resolvedSink('healthy'), resolvedSink('flaky')]

test('per-sink failures: a failing sink does not hold back a healthy one, shows Failing, and ends Synced', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ sinks: TWO_SINKS, debounceMs: 2_000 }))
  const healthy = factory.sink('team-a/healthy')
  const flaky = factory.sink('team-a/flaky')
  flaky.failNextWrites(3)
  flaky.hold() // the 4th attempt (the first to succeed) waits, so the Failing state can be observed

  const items = itemsOf(T1, 3)
  const reportedAt = clock.now()
  await exporter.reportTarget(report(T1, items))
  clock.advance(2_000)

  await eventually(() => healthy.writes.length === 1, 'the healthy sink\'s write')
  assert.equal(healthy.writes[0]?.at, reportedAt + 2_000, 'the healthy sink is written when the debounce elapses')
  assert.equal(healthy.writes[0]?.checksum, expected(items).checksum)

  await eventually(() => flaky.attempts.length === 4, 'three failed attempts and a fourth in flight')
  assert.equal(flaky.writes.length, 0)
  const during = exporter.inventoryState(INV)
  assert.equal(sinkState(during, 'flaky').state, 'Failing')
  assert.equal(sinkState(during, 'flaky').message, flaky.failureMessage, 'status says why the sink is behind')
  assert.equal(sinkState(during, 'flaky').checksum, '')
  assert.equal(sinkState(during, 'healthy').state, 'Synced')
  assert.equal(sinkState(during, 'healthy').message, '')
  assert.equal(sinkState(during, 'healthy').checksum, expected(items).checksum)

  flaky.release()
  await exporter.idle()
  assert.deepEqual(flaky.checksums, [expected(items).checksum])
  assert.equal(healthy.attempts.length, 1, 'the healthy sink is not written again because of the other one\'s retries')
  const after = exporter.inventoryState(INV)
  for (const name of ['healthy', 'flaky']) {
    assert.equal(sinkState(after, name).state, 'Synced', name)
    assert.equal(sinkState(after, name).message, '', name)
    assert.equal(sinkState(after, name).checksum, expected(items).checksum, name)
    assert.equal(sinkState(after, name).itemCount, 3, name)
  }
})

test('per-sink failures: a newer snapshot arriving while a sink retries supersedes the old one', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ sinks: TWO_SINKS, debounceMs: 2_000 }))
  const healthy = factory.sink('team-a/healthy')
  const flaky = factory.sink('team-a/flaky')
  flaky.failNextWrites(Number.POSITIVE_INFINITY)

  const itemsA = itemsOf(T1, 3)
  const A = expected(itemsA).checksum
  await exporter.reportTarget(report(T1, itemsA))
  clock.advance(2_000)
  await eventually(() => flaky.attempts.length >= 2, 'the flaky sink retrying snapshot A')

  const itemsB = [bumpReplicas(itemsA[0]!, 7), ...itemsA.slice(1), ...itemsOf(T1, 1, 50)]
  const B = expected(itemsB).checksum
  await exporter.reportTarget(report(T1, itemsB))
  clock.advance(2_000)
  await eventually(() => flaky.attempts.some((a) => a.checksum === B), 'a retry carrying snapshot B')
  assert.equal(sinkState(exporter.inventoryState(INV), 'flaky').state, 'Failing')
  flaky.failNextWrites(0)
  await exporter.idle()

  assert.deepEqual(healthy.checksums, [A, B])
  assert.deepEqual(flaky.checksums, [B], 'the retrying sink writes the newest snapshot, not the stale one')
  const firstB = flaky.attempts.findIndex((a) => a.checksum === B)
  assert.ok(flaky.attempts.slice(firstB).every((a) => a.checksum === B), 'no attempt with the stale snapshot after the newest')
  assert.equal(flaky.lastWrite?.snapshot.itemCount, 4)
  const state = exporter.inventoryState(INV)
  assert.equal(sinkState(state, 'flaky').state, 'Synced')
  assert.equal(sinkState(state, 'flaky').checksum, B)
  assert.equal(state?.checksum, B)
})

test('per-sink failures: snapshots queued behind a write in flight collapse to the newest', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ sinks: TWO_SINKS, debounceMs: 2_000 }))
  const healthy = factory.sink('team-a/healthy')
  const slow = factory.sink('team-a/flaky')
  slow.hold()

  const states = [itemsOf(T1, 1), itemsOf(T1, 2), itemsOf(T1, 3)]
  const sums = states.map((s) => expected(s).checksum)
  for (const items of states) {
    await exporter.reportTarget(report(T1, items))
    clock.advance(2_000)
    await eventually(() => healthy.checksums.includes(expected(items).checksum), 'the healthy sink keeping up')
  }
  assert.equal(slow.attempts.length, 1, 'one write in flight; the rest wait')
  assert.equal(sinkState(exporter.inventoryState(INV), 'flaky').state, 'Pending')

  slow.release()
  await exporter.idle()
  assert.deepEqual(healthy.checksums, sums)
  assert.deepEqual(slow.checksums, [sums[0], sums[2]], 'the in-flight write completes, then only the newest follows')
  assert.equal(sinkState(exporter.inventoryState(INV), 'flaky').checksum, sums[2])
})

test('per-sink failures: a sink write that throws a TypeError is retried like any other failure', LIMIT, async (t) => {
  // exporter/retry.ts passes shouldRetry so that "for a sink any failure is worth another try".
  const { clock, factory, exporter, logs } = harness(t)
  await exporter.applyInventory(composition({ sinks: TWO_SINKS, debounceMs: 2_000 }))
  const flaky = factory.sink('team-a/flaky')
  flaky.failNextWrites(1, () => new TypeError("Cannot read properties of null (reading 'query')"))

  const items = itemsOf(T1, 2)
  await exporter.reportTarget(report(T1, items))
  clock.advance(2_000)
  await exporter.idle()
  await eventually(
    () => flaky.writes.length === 1 || logs.some((l) => l.level === 'error'),
    'the write retried after a TypeError, or the writer giving up',
  )
  assert.deepEqual(logs.filter((l) => l.level === 'error').map((l) => `${l.msg}: ${String(l.fields?.['error'])}`), [], 'the writer must not give up')
  assert.equal(flaky.attempts.length, 2, 'one failed attempt, then one that succeeds')
  assert.equal(flaky.writes.length, 1)
  assert.equal(sinkState(exporter.inventoryState(INV), 'flaky').state, 'Synced')
  assert.equal(sinkState(exporter.inventoryState(INV), 'flaky').checksum, expected(items).checksum)
})

test('per-sink failures: a permanent error is not retried hot; it waits the maximum backoff and re-arms at once on a change', LIMIT, async (t) => {
  const { clock, factory, exporter, logs } = harness(t, { backoff: { minMs: 1, maxMs: 60_000, factor: 2 } })
  await exporter.applyInventory(composition({ debounceMs: 1_000 }))
  const sink = factory.sink('team-a/primary')
  sink.failNextWrites(Infinity, () => new SinkError('postgres sink team-a/primary: table name is invalid (test)', { retriable: false }))
  await exporter.reportTarget(report(T1, itemsOf(T1, 2)))
  clock.advance(1_000)
  await eventually(() => sink.attempts.length === 1, 'the first attempt')
  await new Promise((r) => setTimeout(r, 50)) // a 1 ms minimum backoff would have retried many times by now
  assert.equal(sink.attempts.length, 1, 'a permanent error is not retried hot')
  const held = sinkState(exporter.inventoryState(INV), 'primary')
  assert.equal(held.state, 'Failing')
  assert.equal(held.message, 'postgres sink team-a/primary: table name is invalid (test) (permanent: tried again in 1m, or at once when the sink or the inventory changes)')
  assert.ok(logs.some((l) => l.msg.startsWith('sink write failed with a permanent error')))

  clock.advance(60_000) // the maximum backoff
  await eventually(() => sink.attempts.length === 2, 'the attempt at the maximum backoff')
  await new Promise((r) => setTimeout(r, 20))
  assert.equal(sink.attempts.length, 2)

  // The inventory changes: tried at once (after its debounce), not a minute later.
  sink.failNextWrites(0)
  await exporter.reportTarget(report(T1, itemsOf(T1, 3)))
  clock.advance(1_000)
  await eventually(() => sink.writes.length === 1, 'the write after the change')
  assert.equal(sinkState(exporter.inventoryState(INV), 'primary').state, 'Synced')
})
