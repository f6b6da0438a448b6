import { test } from 'node:test'
import assert from 'node:assert/strict'
import { realClock, SinkDriver, type DriverContext } from '../../../exporter/index.js'
import { NO_FENCE } from '../../../sinks/fence.js'
import { SinkError } from '../../../sinks/sink.js'
import { CLUSTER, composition, eventually, expected, FAST_BACKOFF, harness, INV, itemsOf, LIMIT, RecordingSink, report, resolvedSink, T1 } from './harness.js'

test('finalize: a Retain sink keeps its data (remove not called); finalized, then the inventory is forgotten', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  const comp = composition({ sinks: [resolvedSink('keep', { deletionPolicy: 'Retain' })], debounceMs: 1_000 })
  await exporter.applyInventory(comp)
  const sink = factory.sink('team-a/keep')
  const items = itemsOf(T1, 2)
  await exporter.reportTarget(report(T1, items))
  clock.advance(1_000)
  await exporter.idle()
  assert.equal(sink.writes.length, 1)

  const result = await exporter.finalizeInventory(comp)
  assert.equal(result.finalized, true)
  assert.equal(result.state.sinks[0]?.checksum, expected(items).checksum, 'the final state is returned')
  assert.equal(sink.removes.length, 0, 'Retain: remove() is not called')
  assert.equal(exporter.inventoryState(INV), null, 'a finalized inventory is forgotten')
  await eventually(() => sink.closeCount === 1, 'the sink closed once no inventory uses it')

  await exporter.reportTarget(report(T1, itemsOf(T1, 5)))
  clock.advance(60_000)
  await exporter.idle()
  assert.equal(sink.attempts.length, 1, 'nothing is exported for a finalized inventory')
})

test('finalize: a Delete sink gets remove() once, with the inventory ref and the sink\'s cluster', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  const comp = composition({
    sinks: [
      resolvedSink('drop-edge', { deletionPolicy: 'Delete', cluster: 'edge-1' }),
      resolvedSink('drop', { deletionPolicy: 'Delete' }),
      resolvedSink('keep'), // no deletionPolicy: Retain
    ],
    debounceMs: 1_000,
  })
  await exporter.applyInventory(comp)
  await exporter.reportTarget(report(T1, itemsOf(T1, 2)))
  clock.advance(1_000)
  await exporter.idle()
  const edge = factory.sink('team-a/drop-edge')
  assert.equal(edge.writes[0]?.cluster, 'edge-1', 'spec.cluster overrides the exporter\'s cluster')

  const result = await exporter.finalizeInventory(comp)
  assert.equal(result.finalized, true)
  assert.deepEqual(edge.removes, [{ inventory: INV, cluster: 'edge-1' }])
  assert.deepEqual(factory.sink('team-a/drop').removes, [{ inventory: INV, cluster: CLUSTER }])
  assert.deepEqual(factory.sink('team-a/keep').removes, [])
  assert.equal(exporter.inventoryState(INV), null)
})

test('finalize: a failing remove() is not finalized; a later call that succeeds is', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  const comp = composition({ sinks: [resolvedSink('drop', { deletionPolicy: 'Delete' })], debounceMs: 1_000 })
  await exporter.applyInventory(comp)
  const sink = factory.sink('team-a/drop')
  await exporter.reportTarget(report(T1, itemsOf(T1, 2)))
  clock.advance(1_000)
  await exporter.idle()
  sink.failNextRemoves(1)

  const first = await exporter.finalizeInventory(comp)
  assert.equal(first.finalized, false)
  assert.equal(sink.removes.length, 1)
  assert.equal(first.state.sinks[0]?.state, 'Failing')
  assert.match(first.state.sinks[0]?.message ?? '', /permission denied/)
  assert.notEqual(exporter.inventoryState(INV), null, 'an unfinalized inventory is still known')
  assert.equal(sink.closeCount, 0)

  const second = await exporter.finalizeInventory(comp)
  assert.equal(second.finalized, true)
  assert.equal(sink.removes.length, 2)
  assert.deepEqual(sink.removes[1], { inventory: INV, cluster: CLUSTER })
  assert.equal(exporter.inventoryState(INV), null)
})

test('finalize: a write still retrying is stopped before remove(), and never lands after it', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  const comp = composition({ sinks: [resolvedSink('drop', { deletionPolicy: 'Delete' })], debounceMs: 1_000 })
  await exporter.applyInventory(comp)
  const sink = factory.sink('team-a/drop')
  sink.failNextWrites(Number.POSITIVE_INFINITY)
  await exporter.reportTarget(report(T1, itemsOf(T1, 2)))
  clock.advance(1_000)
  await eventually(() => sink.attempts.length >= 2, 'the write retrying')

  const result = await exporter.finalizeInventory(comp)
  assert.equal(result.finalized, true)
  assert.equal(sink.removes.length, 1)
  const attemptsAtRemove = sink.attempts.length
  sink.failNextWrites(0)
  await new Promise((r) => setTimeout(r, 30)) // several backoff periods in real time
  await exporter.idle()
  assert.equal(sink.attempts.length, attemptsAtRemove, 'no write attempt after the delete')
  assert.equal(sink.writes.length, 0)
})

test('finalize: an inventory the exporter has not seen (after a restart) still gets its Delete sinks cleaned', LIMIT, async (t) => {
  const { factory, exporter } = harness(t)
  const comp = composition({ sinks: [resolvedSink('drop', { deletionPolicy: 'Delete' })] })
  const result = await exporter.finalizeInventory(comp)
  assert.equal(result.finalized, true)
  assert.deepEqual(factory.sink('team-a/drop').removes, [{ inventory: INV, cluster: CLUSTER }])
  assert.equal(factory.sink('team-a/drop').attempts.length, 0)
  assert.equal(exporter.inventoryState(INV), null)
})

test('finalizeUntilDone: a driver retries its removal through transient errors and a permanent one, logging each, until the sink removed it', LIMIT, async () => {
  const sink = new RecordingSink('team-a/drop', resolvedSink('drop', { deletionPolicy: 'Delete' }), realClock)
  const logs: { level: string; msg: string; fields?: Record<string, unknown> }[] = []
  const ctx: DriverContext = {
    clock: realClock, backoff: FAST_BACKOFF, log: (level, msg, fields) => logs.push({ level, msg, ...(fields ? { fields } : {}) }),
    observer: undefined, mayWrite: () => true, fence: NO_FENCE,
  }
  let permanent = true
  const driver = new SinkDriver(ctx, {
    ref: { namespace: 'team-a', name: 'drop' }, inventory: INV, resolved: sink.resolved, desired: () => null, driftChecks: false,
    // Building the sink fails once for good (a permanent error waits the maximum backoff), then works.
    open: async () => {
      if (permanent) {
        permanent = false
        throw new SinkError('sink drop: bad credentials (test)', { retriable: false })
      }
      return sink
    },
  })
  sink.failNextRemoves(2)
  await driver.finalizeUntilDone(CLUSTER, new AbortController().signal)
  assert.deepEqual(sink.removes.map((r) => r.cluster), [CLUSTER, CLUSTER, CLUSTER], 'two failed removes, then the one that worked')
  assert.deepEqual(logs.map((l) => `${l.level} ${l.msg}`), [
    'error sink removal failed with a permanent error; trying again after the maximum backoff',
    'warn sink removal failed; retrying',
    'info sink removal failed; retrying',
  ])
  assert.deepEqual(logs[0]?.fields, { sink: 'team-a/drop', inventory: 'team-a/prod', error: 'sink drop: bad credentials (test)' })
  assert.equal(driver.failure, null, 'the last removal worked: status shows no failure')
})

test('finalizeUntilDone: an aborted owner (the hub stopping) stops the retries with a rejection', LIMIT, async () => {
  const sink = new RecordingSink('team-a/drop', resolvedSink('drop', { deletionPolicy: 'Delete' }), realClock)
  const ctx: DriverContext = { clock: realClock, backoff: { minMs: 50, maxMs: 50, factor: 1 }, log: () => undefined, observer: undefined, mayWrite: () => true, fence: NO_FENCE }
  const driver = new SinkDriver(ctx, { ref: { namespace: 'team-a', name: 'drop' }, inventory: INV, resolved: sink.resolved, desired: () => null, driftChecks: false, open: async () => sink })
  sink.failNextRemoves(Number.POSITIVE_INFINITY)
  const stop = new AbortController()
  const removal = driver.finalizeUntilDone(CLUSTER, stop.signal)
  setTimeout(() => stop.abort(), 120)
  await assert.rejects(removal)
  const tries = sink.removes.length
  assert.ok(tries >= 2, `it retried before the abort (${tries})`)
  await new Promise((r) => setTimeout(r, 150))
  assert.equal(sink.removes.length, tries, 'no attempt after the abort')
})
