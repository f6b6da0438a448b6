import { test } from 'node:test'
import assert from 'node:assert/strict'
import { composition, eventually, expected, harness, itemsOf, LIMIT, report, resolvedSink, T1 } from './harness.js'

// Fencing by the Lease: under leader election a sink call starts only within the renew deadline of
// the last renewal. A holder resumed from a pause runs its debounce timer before its renew loop
// learns the Lease is gone; without the check that write lands after the new holder's.

const DEADLINE = { standby: true, renewDeadlineMs: 3_000 } as const

test('a debounce that fires past the renew deadline starts no write; the export stays owed until a renewal', LIMIT, async (t) => {
  const { clock, factory, exporter, logs } = harness(t, DEADLINE)
  exporter.leaseRenewed(clock.now())
  exporter.setActive(true)
  await exporter.applyInventory(composition({ debounceMs: 1_000 }))
  await exporter.reportTarget(report(T1, itemsOf(T1, 1)))
  clock.advance(1_000)
  await exporter.idle()
  const sink = factory.sink('team-a/primary')
  assert.equal(sink.writes.length, 1, 'renewed 1 s ago: written')

  // The renew loop stalls (the process was stopped): the next change's debounce fires 4.5 s after
  // the last renewal.
  clock.advance(2_500)
  await exporter.reportTarget(report(T1, itemsOf(T1, 2)))
  clock.advance(1_000)
  await exporter.idle()
  assert.equal(sink.attempts.length, 1, 'no write started without a renewal within the deadline')
  assert.equal(exporter.pendingCount(), 1, 'the export is owed, not dropped')
  assert.ok(logs.some((l) => l.level === 'warn' && /not renewed within the renew deadline/.test(l.msg)), 'and the wait is logged')
  clock.advance(60_000)
  await exporter.idle()
  assert.equal(sink.attempts.length, 1, 'time alone does not restart the writer')

  exporter.leaseRenewed(clock.now())
  await exporter.idle()
  assert.deepEqual(sink.checksums, [expected(itemsOf(T1, 1)).checksum, expected(itemsOf(T1, 2)).checksum], 'the renewal writes the owed export')
  assert.equal(exporter.pendingCount(), 0)
})

test('a retrying writer stops before its next attempt once the last renewal is past the deadline', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t, DEADLINE)
  exporter.leaseRenewed(clock.now())
  exporter.setActive(true)
  await exporter.applyInventory(composition({ debounceMs: 1_000 }))
  await exporter.reportTarget(report(T1, itemsOf(T1, 3)))
  clock.advance(1_000)
  const sink = factory.sink('team-a/primary')
  sink.failNextWrites(Infinity)
  await eventually(() => sink.attempts.length >= 2, 'the writer retries')

  clock.advance(2_000)
  // Bounded: a writer that ignored the deadline would retry forever and never go idle.
  await Promise.race([exporter.idle(), new Promise((r) => setTimeout(r, 2_000))])
  const attempts = sink.attempts.length
  sink.failNextWrites(0)
  await new Promise((r) => setTimeout(r, 50))
  assert.equal(sink.attempts.length, attempts, 'no attempt after the deadline passed')
  assert.equal(exporter.pendingCount(), 1)

  exporter.leaseRenewed(clock.now())
  await exporter.idle()
  assert.equal(sink.lastWrite?.checksum, expected(itemsOf(T1, 3)).checksum)
  assert.equal(exporter.pendingCount(), 0)
})

test('a finalize past the renew deadline deletes nothing until a renewal', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t, DEADLINE)
  exporter.leaseRenewed(clock.now())
  exporter.setActive(true)
  const comp = composition({ debounceMs: 1_000, sinks: [resolvedSink('primary', { deletionPolicy: 'Delete' })] })
  await exporter.applyInventory(comp)
  clock.advance(3_000)
  const removes = () => factory.all('team-a/primary').flatMap((s) => s.removes).length
  assert.equal((await exporter.finalizeInventory(comp)).finalized, false)
  assert.equal(removes(), 0)
  exporter.leaseRenewed(clock.now())
  assert.equal((await exporter.finalizeInventory(comp)).finalized, true)
  assert.equal(removes(), 1)
})
