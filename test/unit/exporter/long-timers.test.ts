import { test } from 'node:test'
import assert from 'node:assert/strict'
import { MAX_NODE_TIMER_MS } from '../../support/clock.js'
import { composition, harness, itemsOf, LIMIT, report, T1 } from './harness.js'

// Issue 24, F7: a debounce past 2^31-1 ms went to setTimeout as it was, which Node runs after
// 1 ms: an inventory with debounce 600h exported within seconds, whatever the scope's
// minDebounce. The fake clock fires such a delay after 1 ms too, as Node does.

const HOUR = 3_600_000

test('a debounce longer than a timer can wait: nothing is exported before it elapses, the export comes when it does', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  const debounceMs = 600 * HOUR
  assert.ok(debounceMs > MAX_NODE_TIMER_MS)
  await exporter.applyInventory(composition({ debounceMs, maxWaitMs: debounceMs }))
  await exporter.reportTarget(report(T1, itemsOf(T1, 2)))
  const reportedAt = clock.now()
  const sink = factory.sink('team-a/primary')
  for (const step of [1, 5_000, HOUR, MAX_NODE_TIMER_MS - HOUR]) {
    clock.advance(step)
    await exporter.idle()
    assert.equal(sink.attempts.length, 0, `nothing exported ${clock.now() - reportedAt} ms after the change`)
  }
  clock.advanceTo(reportedAt + debounceMs - 1)
  await exporter.idle()
  assert.equal(sink.attempts.length, 0, 'nothing 1 ms before the debounce elapses')
  clock.advance(1)
  await exporter.idle()
  assert.equal(sink.writes.length, 1)
  assert.equal(sink.writes[0]?.at, reportedAt + debounceMs)
})
