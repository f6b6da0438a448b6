// kollect_exports_pending_by_sink: what each sink owes, so KollectSinkStale (docs/operations.md)
// can join a sink's age with that sink's own pending exports, not with any sink's (issue 27).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createMetrics } from '../../../server/process/metrics.js'
import { composition, eventually, harness, itemsOf, LIMIT, report, resolvedSink, T1 } from './harness.js'

/** The value of one series in the exposition text, or undefined when it is absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

test('pending by sink: a sink that keeps failing owes, a healthy one beside it owes nothing', LIMIT, async (t) => {
  const metrics = createMetrics('exporter')
  const { clock, factory, exporter } = harness(t, { observer: metrics.exporterObserver })
  const other = { namespace: 'team-a', name: 'other' }
  await exporter.applyInventory(composition({ sinks: [resolvedSink('healthy'), resolvedSink('stuck')], debounceMs: 2_000 }))
  // A second inventory on the stuck sink: the series counts what the sink owes over inventories.
  await exporter.applyInventory(composition({ inventory: other, sinks: [resolvedSink('stuck')], debounceMs: 2_000 }))
  const healthy = factory.sink('team-a/healthy')
  for (const s of factory.all('team-a/stuck')) s.failNextWrites(Number.POSITIVE_INFINITY)

  await exporter.reportTarget(report(T1, itemsOf(T1, 3)))
  clock.advance(2_000)
  await eventually(() => healthy.writes.length === 1, 'the healthy sink\'s write')
  await eventually(() => factory.all('team-a/stuck').every((s) => s.attempts.length >= 2), 'the stuck sink retrying')

  const during = await metrics.registry.metrics()
  assert.equal(sample(during, 'kollect_exports_pending'), 2, 'the global gauge: two owed exports')
  assert.equal(sample(during, 'kollect_exports_pending_by_sink{sink="team-a/stuck"}'), 2)
  assert.equal(sample(during, 'kollect_exports_pending_by_sink{sink="team-a/healthy"}'), 0, 'the healthy sink owes nothing')

  for (const s of factory.all('team-a/stuck')) s.failNextWrites(0)
  await exporter.idle()
  const after = await metrics.registry.metrics()
  assert.equal(sample(after, 'kollect_exports_pending'), 0)
  assert.equal(sample(after, 'kollect_exports_pending_by_sink{sink="team-a/stuck"}'), 0)
  assert.equal(sample(after, 'kollect_exports_pending_by_sink{sink="team-a/healthy"}'), 0)
})
