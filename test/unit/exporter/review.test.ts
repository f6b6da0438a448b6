import { test } from 'node:test'
import assert from 'node:assert/strict'
import { SinkError } from '../../../sinks/sink.js'
import { composition, expected, harness, INV, itemsOf, LIMIT, report, T1 } from './harness.js'

// A sink that proposes snapshots for review (git review mode) reports AwaitingReview with the
// request's URL, and the exporter writes the same snapshot again at the sink's poll interval
// until a write says the store of record holds it.

const URL = 'https://forge.example/platform/inventory/pulls/7'
const POLL_MS = 30_000

async function proposed(t: Parameters<typeof harness>[0]) {
  const h = harness(t)
  await h.exporter.applyInventory(composition())
  const sink = h.factory.sink('team-a/primary')
  sink.reviewing = { url: URL, pollMs: POLL_MS }
  const items = itemsOf(T1, 3)
  await h.exporter.reportTarget(report(T1, items))
  h.clock.advance(2_000)
  await h.exporter.idle()
  return { ...h, sink, items }
}

test('review: AwaitingReview with the URL, polled by writing the same snapshot until it is merged, then Synced and no more polls', LIMIT, async (t) => {
  const { clock, exporter, sink, items } = await proposed(t)
  const awaiting = exporter.inventoryState(INV)
  assert.deepEqual(awaiting?.sinks.map((s) => [s.state, s.reviewUrl, s.message, s.checksum]), [['AwaitingReview', URL, `awaiting review: ${URL}`, expected(items).checksum]])
  assert.equal(awaiting?.nextChangeInMs, POLL_MS, 'the poll is the next change')

  clock.advance(POLL_MS - 1)
  await exporter.idle()
  assert.equal(sink.attempts.length, 1, 'no poll before the interval')
  clock.advance(1)
  await exporter.idle()
  assert.deepEqual(sink.checksums, [expected(items).checksum, expected(items).checksum], 'the poll writes the same snapshot')
  assert.deepEqual(exporter.inventoryState(INV)?.sinks, awaiting?.sinks, 'a poll that finds the request open changes nothing in status, lastExportTime included')

  sink.reviewing = null // merged
  clock.advance(POLL_MS)
  await exporter.idle()
  const synced = exporter.inventoryState(INV)
  assert.deepEqual(synced?.sinks.map((s) => [s.state, s.reviewUrl, s.message]), [['Synced', undefined, '']])
  assert.notEqual(synced?.sinks[0]?.lastExportTime, awaiting?.sinks[0]?.lastExportTime, 'the merge is when the record took the snapshot')
  assert.equal(synced?.nextChangeInMs, undefined)
  clock.advance(10 * POLL_MS)
  await exporter.idle()
  assert.equal(sink.attempts.length, 3, 'a Synced sink is not polled')
})

test('review: a change while awaiting review is exported at once after its debounce, not held to the poll', LIMIT, async (t) => {
  const { clock, exporter, sink } = await proposed(t)
  const next = itemsOf(T1, 4)
  await exporter.reportTarget(report(T1, next))
  assert.equal(exporter.inventoryState(INV)?.pending, true)
  clock.advance(2_000)
  await exporter.idle()
  assert.equal(sink.lastWrite?.checksum, expected(next).checksum)
  const state = exporter.inventoryState(INV)
  assert.deepEqual(state?.sinks.map((s) => [s.state, s.checksum]), [['AwaitingReview', expected(next).checksum]])
  assert.equal(state?.nextChangeInMs, POLL_MS, 'the poll restarts with the new proposal')
})

test('review: a poll that fails says Failing with the reason, and a later success returns to the review', LIMIT, async (t) => {
  const { clock, exporter, sink } = await proposed(t)
  sink.failNextWrites(1, () => new SinkError('git sink team-a/primary: review request was closed without merging', { retriable: false }))
  clock.advance(POLL_MS)
  await exporter.idle()
  const failing = exporter.inventoryState(INV)?.sinks[0]
  assert.equal(failing?.state, 'Failing')
  assert.match(failing?.message ?? '', /closed without merging \(permanent/)
  assert.equal(failing?.reviewUrl, undefined)
  clock.advance(5)
  await exporter.idle()
  assert.equal(exporter.inventoryState(INV)?.sinks[0]?.state, 'AwaitingReview')
})
