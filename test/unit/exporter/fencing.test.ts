import { test } from 'node:test'
import assert from 'node:assert/strict'
import { FencedError } from '../../../sinks/fence.js'
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
  assert.ok(logs.some((l) => l.level === 'warn' && /waits for a lease renewal/.test(l.msg) && /not renewed within the renew deadline/.test(String(l.fields?.['reason']))), 'and the wait is logged')
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

test('every write carries the holder\'s fencing token, and a write paused past the deadline is refused at its commit point', LIMIT, async (t) => {
  const { clock, factory, exporter, logs } = harness(t, DEADLINE)
  const token = { lease: 'lease-uid', epoch: 7 }
  exporter.leaseRenewed(clock.now(), token)
  exporter.setActive(true)
  await exporter.applyInventory(composition({ debounceMs: 1_000 }))
  await exporter.reportTarget(report(T1, itemsOf(T1, 1)))
  clock.advance(1_000)
  await exporter.idle()
  const sink = factory.sink('team-a/primary')
  assert.deepEqual(sink.writes.map((w) => w.token), [token])

  // The write has started (renewed 0 s before) and stalls inside the sink, past the deadline.
  exporter.leaseRenewed(clock.now(), token)
  sink.hold()
  await exporter.reportTarget(report(T1, itemsOf(T1, 2)))
  clock.advance(1_000)
  await eventually(() => sink.attempts.length === 2, 'the second write starts')
  clock.advance(3_000)
  sink.release()
  await exporter.idle()
  assert.equal(sink.writes.length, 1, 'the stalled write reached no commit')
  assert.equal(sink.attempts.length, 2, 'and is not retried while the lease is unproven')
  assert.equal(exporter.pendingCount(), 1)
  assert.ok(logs.some((l) => l.level === 'warn' && /waits for a lease renewal/.test(l.msg) && /not committing \(test\)/.test(String(l.fields?.['reason']))), 'the wait names the commit point')

  exporter.leaseRenewed(clock.now(), { ...token, epoch: 8 })
  await exporter.idle()
  assert.deepEqual(sink.writes.map((w) => w.token?.epoch), [7, 8], 'written after the renewal, with the token it renewed with')
  assert.equal(exporter.pendingCount(), 0)
})

test('a sink that finds a later leader in its store is not retried: the export waits for a renewal', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t, DEADLINE)
  exporter.leaseRenewed(clock.now(), { lease: 'lease-uid', epoch: 2 })
  exporter.setActive(true)
  await exporter.applyInventory(composition({ debounceMs: 1_000 }))
  const sink = factory.sink('team-a/primary')
  sink.failNextWrites(1, () => new FencedError('the snapshot table was written by a later leader (test)'))
  await exporter.reportTarget(report(T1, itemsOf(T1, 1)))
  clock.advance(1_000)
  await exporter.idle()
  clock.advance(60_000)
  await exporter.idle()
  assert.equal(sink.attempts.length, 1, 'a refusal is not a failure to retry with backoff')
  assert.equal(exporter.pendingCount(), 1, 'the export is owed')
  exporter.leaseRenewed(clock.now(), { lease: 'lease-uid', epoch: 2 })
  await exporter.idle()
  assert.equal(sink.writes.length, 1)
})
