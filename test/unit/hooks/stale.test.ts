import { test } from 'node:test'
import assert from 'node:assert/strict'
import { validateStatus } from '../../../api/crd-schemas.js'
import type { Condition, TargetStatus } from '../../../api/types.js'
import type { SyncRequest, SyncResponse } from '../../../hooks/request.js'
import { staleItemsTargetSync, staleTargetSync, syncTarget } from '../../../hooks/target.js'
import { deployment, loadExampleCr, targetSyncRequest } from '../../support/metacontroller.js'
import { asSyncRequest, cond } from './fixtures.js'

// Issue 16, finding 2: what a target sync reports to order it, and what it answers when the
// exporter found it (or some of its objects) older than what it holds.

const CTX = { plural: { plural: 'deployments', source: 'spec' as const } }

function answer(generation: number, conditions: Condition[]): SyncResponse<TargetStatus> {
  return { status: { observedGeneration: generation, matchedCount: 1, extractedCount: 1, failedCount: 0, lastError: '', checksum: 'c-new', conditions }, children: [] }
}

test('the report carries the target uid and each item\'s metadata.generation, in item order (null where absent)', () => {
  const target = loadExampleCr('target-deployments.yaml')
  target.metadata = { ...target.metadata, generation: 4 }
  const [d1, d2, d3] = [deployment(3), deployment(1), deployment(2)]
  d1.metadata = { ...d1.metadata, generation: 9 }
  d2.metadata = { ...d2.metadata, generation: 7 }
  delete d3.metadata?.generation
  const { report } = syncTarget(asSyncRequest(targetSyncRequest([d1, d2, d3], { target })) as SyncRequest, CTX)
  assert.ok(report)
  assert.equal(report.uid, 'uid-prod-deploys')
  assert.equal(report.generation, 4)
  assert.deepEqual(report.items.map((i) => i.name), ['web-00001', 'web-00002', 'web-00003'])
  assert.deepEqual(report.itemGenerations, [7, null, 9])
  assert.equal(report.sequence, undefined, 'the server stamps the sequence on arrival, never the pure hook')
})

test('a dropped report answers the held generation and checksum, with Stale, and every condition at that generation', () => {
  const got = staleTargetSync(answer(4, [cond('Ready', 'True', 'Extracted', '1 of 1 matched objects extracted', 4)]), {
    message: 'the exporter holds a report of generation 5; this one, of generation 4, was dropped as stale',
    heldGeneration: 5,
    heldChecksum: 'c-held',
  })
  assert.deepEqual(got, {
    status: {
      observedGeneration: 5,
      matchedCount: 1,
      extractedCount: 1,
      failedCount: 0,
      lastError: '',
      checksum: 'c-held',
      conditions: [
        cond('Ready', 'True', 'Extracted', '1 of 1 matched objects extracted', 5),
        cond('Stale', 'True', 'StaleReportDropped', 'the exporter holds a report of generation 5; this one, of generation 4, was dropped as stale', 5),
      ],
    },
    children: [],
  })
  assert.deepStrictEqual(validateStatus('KollectTarget', got.status), { valid: true }, 'the CRD\'s status schema takes the Stale condition')
})

test('stale items add Degraded StaleItemsKept, or join the message of a Degraded already there', () => {
  const ready = cond('Ready', 'True', 'Extracted', '3 of 3 matched objects extracted', 2)
  assert.deepEqual(staleItemsTargetSync(answer(2, [ready]), 2).status.conditions, [
    cond('Degraded', 'True', 'StaleItemsKept', '2 objects were older (metadata.generation) than the exporter\'s items for them; the newer items were kept', 2),
    ready,
  ])
  const denied = cond('Degraded', 'True', 'ScopeNamespaceDenied', 'namespaces not allowed by scope: team-b', 2)
  assert.deepEqual(staleItemsTargetSync(answer(2, [ready, denied]), 1).status.conditions, [
    cond('Degraded', 'True', 'ScopeNamespaceDenied',
      'namespaces not allowed by scope: team-b; 1 object was older (metadata.generation) than the exporter\'s items for them; the newer items were kept', 2),
    ready,
  ])
})
