import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parsedReport, withSequence } from '../../../api/report.js'
import type { TargetReport } from '../../../api/types.js'
import { reportBody } from '../../../server/exporter-api/client.js'

// Issue 28: a target report goes from the extraction child to the exporter as the child
// serialised it; the hooks server only puts its arrival stamp first.

const REPORT: TargetReport = {
  target: { namespace: 'team-a', name: 'prod-deploys' }, generation: 3, uid: 'u-1', checksum: 'c'.repeat(64),
  items: [{
    group: 'apps', version: 'v1', kind: 'Deployment', namespace: 'team-a', name: 'web', uid: 'u-web',
    target: { namespace: 'team-a', name: 'prod-deploys' }, attributes: { image: 'nginx:1.27', note: 'naïve ✓' },
  }],
  failedKeys: [], itemGenerations: [2],
}

test('withSequence puts the stamp first and leaves every other byte of the report as it was', () => {
  const json = Buffer.from(JSON.stringify(REPORT))
  const stamped = withSequence(json, 1_764_633_600_000_123)
  assert.equal(Buffer.from(stamped).toString('utf8'), `{"sequence":1764633600000123,${JSON.stringify(REPORT).slice(1)}`)
  assert.deepEqual(JSON.parse(Buffer.from(stamped).toString('utf8')), { sequence: 1_764_633_600_000_123, ...REPORT })
  // Multi-byte text survives: the splice is on bytes, at the opening brace.
  assert.deepEqual(parsedReport({ target: REPORT.target, generation: 3, itemCount: 1, json: stamped }).items[0]?.attributes, { image: 'nginx:1.27', note: 'naïve ✓' })
})

test('withSequence refuses what is not a non-empty JSON object, rather than send broken JSON', () => {
  for (const text of ['{}', '[]', ' {"a":1}', '']) assert.throws(() => withSequence(Buffer.from(text), 1), /non-empty JSON object/, text)
})

test('a serialised report goes over HTTP as it is; an object report is serialised; parsedReport reads either', () => {
  const json = withSequence(Buffer.from(JSON.stringify(REPORT)), 7)
  const serialised = { target: REPORT.target, generation: 3, itemCount: 1, json }
  assert.equal(reportBody(serialised), json, 'the same bytes, not a copy')
  assert.equal(reportBody(REPORT), JSON.stringify(REPORT))
  assert.equal(parsedReport(REPORT), REPORT)
  assert.deepEqual(parsedReport(serialised), { sequence: 7, ...REPORT })
})
