import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { MAX_DURATION_MS, MAX_RETENTION_MS, durationProblem, parseDuration } from '../../api/duration.js'
import type { KollectSinkSpec, KubeObject } from '../../api/types.js'
import { ruleFindings } from '../../cli/crd-rules.js'
import { driftSettings } from '../../exporter/drift.js'
import { composeInventory } from '../../hooks/inventory.js'
import { effectiveScope } from '../../hooks/scope.js'
import { sinkProblems } from '../../hooks/sink-sync.js'
import { controllerFor, loadExampleCr, relatedMap, syncRequest, TYPES } from '../support/metacontroller.js'
import { asSyncRequest, scopeCr, wire } from './hooks/fixtures.js'

// Issue 24, F7: durations have a documented maximum (168h for what the exporter waits, 87600h
// for retention), enforced by the CRDs' rules, by the hooks for clusters whose admission was
// bypassed, and by parsing (no Infinity, no unsafe integers).

const HOUR = 3_600_000

describe('parseDuration', () => {
  const cases: [string, number | null][] = [
    ['10s', 10_000], ['1h30m', 5_400_000], ['1.5h', 5_400_000], ['500ms', 500], ['168h', MAX_DURATION_MS], ['87600h', MAX_RETENTION_MS],
    ['87600h1ms', null], ['600h', 600 * HOUR], [`${'9'.repeat(400)}h`, null], ['9007199254740993ms', null], ['', null], ['10', null], ['1d', null], ['-1s', null],
  ]
  for (const [text, want] of cases) test(`${JSON.stringify(text.slice(0, 20))} is ${String(want)}`, () => assert.equal(parseDuration(text), want))

  test('durationProblem names the field and the maximum', () => {
    assert.equal(durationProblem('spec.debounce', '168h', MAX_DURATION_MS), null)
    assert.equal(durationProblem('spec.debounce', '600h', MAX_DURATION_MS), 'spec.debounce: "600h" is longer than the maximum 168h')
    assert.equal(durationProblem('spec.debounce', '168h1ms', MAX_DURATION_MS), 'spec.debounce: "168h1ms" is longer than the maximum 168h')
    assert.equal(durationProblem('spec.maxWait', `${'9'.repeat(400)}h`, MAX_DURATION_MS), `spec.maxWait: "${'9'.repeat(64)}" is longer than the maximum 168h`)
    assert.equal(durationProblem('spec.maxWait', '2 minutes', MAX_DURATION_MS), 'spec.maxWait: "2 minutes" is not a duration such as 10s, 2m or 1h30m')
  })
})

function inventorySync(spec: Record<string, unknown>, scopes: KubeObject[] = []) {
  const inv = loadExampleCr('inventory.yaml')
  const parent = wire({ ...inv, spec: { ...(inv['spec'] as object), ...spec } })
  return asSyncRequest(syncRequest(controllerFor('kollect-inventories'), parent, relatedMap([TYPES.scope, TYPES.target, TYPES.sink], {
    [TYPES.target]: [loadExampleCr('target-deployments.yaml')], [TYPES.sink]: [loadExampleCr('sink-git.yaml')], [TYPES.scope]: scopes,
  })))
}

describe('the hooks refuse durations past the maximum', () => {
  test('an inventory with debounce 600h under a scope with minDebounce 10m is InvalidSpec, not exported', () => {
    const composed = composeInventory(inventorySync({ debounce: '600h', maxWait: '600h' }, [scopeCr('slow', { minDebounce: '10m' })]))
    assert.deepEqual(composed, {
      ok: false,
      problems: [{ reason: 'InvalidSpec', message: 'spec.debounce: "600h" is longer than the maximum 168h; spec.maxWait: "600h" is longer than the maximum 168h' }],
    })
  })

  test('debounce and maxWait of 168h are accepted', () => {
    const composed = composeInventory(inventorySync({ debounce: '168h', maxWait: '168h' }))
    assert.ok(composed.ok, JSON.stringify(composed))
    assert.deepEqual([composed.composition.debounceMs, composed.composition.maxWaitMs], [MAX_DURATION_MS, MAX_DURATION_MS])
  })

  test('a scope minDebounce past the maximum binds at the maximum, never at nothing', () => {
    for (const minDebounce of ['600h', `${'9'.repeat(60)}h`]) {
      assert.equal(effectiveScope('team-a', [{ name: 's', spec: { minDebounce } }]).minDebounceMs, MAX_DURATION_MS, minDebounce)
    }
  })

  test('a sink\'s drift interval, review poll interval and retention ages past their maxima are sink problems', () => {
    const policy = { checkEndpoint: () => null }
    const git = { type: 'git', git: { url: 'https://git.example.com/x.git', review: { provider: 'gitea', apiUrl: 'https://git.example.com/api/v1', project: 'o/r', pollInterval: '200h' } }, drift: { interval: '169h' }, secretRef: { name: 's' } }
    assert.deepEqual(sinkProblems(git as KollectSinkSpec, policy), [
      'spec.drift.interval: "169h" is longer than the maximum 168h',
      'spec.git.review.pollInterval: "200h" is longer than the maximum 168h',
    ])
    assert.deepEqual(sinkProblems({ type: 'postgres', postgres: { snapshotMaxAge: '87601h' }, secretRef: { name: 's' } } as KollectSinkSpec, policy),
      ['spec.postgres.snapshotMaxAge: "87601h" is longer than the maximum 87600h'])
    assert.deepEqual(sinkProblems({ type: 'nats', nats: { url: 'nats://n:4222', maxAge: '100000h' } } as KollectSinkSpec, policy), ['spec.nats.maxAge: "100000h" is longer than the maximum 87600h'])
    assert.deepEqual(sinkProblems({ type: 'postgres', postgres: { snapshotMaxAge: '2160h' }, secretRef: { name: 's' } } as KollectSinkSpec, policy), [])
  })

  test('the exporter never waits longer than the maximum between drift checks', () => {
    assert.equal(driftSettings({ namespace: 'a', name: 'b', spec: { type: 'git', drift: { interval: '9000h' } } as KollectSinkSpec }).intervalMs, MAX_DURATION_MS)
  })
})

describe('the CRDs\' rules refuse durations past the maximum (as kollect validate evaluates them)', () => {
  const cases: [kind: Parameters<typeof ruleFindings>[0], spec: Record<string, unknown>, path: string][] = [
    ['KollectInventory', { debounce: '600h' }, 'spec.debounce'],
    ['KollectInventory', { maxWait: '168h1s' }, 'spec.maxWait'],
    ['KollectScope', { minDebounce: '1000h' }, 'spec.minDebounce'],
    ['KollectSink', { type: 'git', drift: { interval: '169h' } }, 'spec.drift.interval'],
    ['KollectSink', { type: 'git', git: { review: { pollInterval: '200h' } } }, 'spec.git.review.pollInterval'],
    ['KollectSink', { type: 'postgres', postgres: { snapshotMaxAge: '87601h' } }, 'spec.postgres.snapshotMaxAge'],
    ['KollectSink', { type: 'nats', nats: { maxAge: '90000h' } }, 'spec.nats.maxAge'],
  ]
  for (const [kind, spec, path] of cases) {
    test(`${kind} ${path}: ${JSON.stringify(spec).slice(0, 60)} is refused`, () => {
      const findings = ruleFindings(kind, spec).filter((f) => f.path === path)
      assert.equal(findings.length, 1, JSON.stringify(ruleFindings(kind, spec)))
      assert.match(findings[0]?.text ?? '', /: must be at most (168h|87600h)$/)
    })
  }
  test('durations at the maximum pass', () => {
    assert.deepEqual(ruleFindings('KollectInventory', { debounce: '168h', maxWait: '167h60m' }), [])
    assert.deepEqual(ruleFindings('KollectSink', { type: 'postgres', postgres: { snapshotMaxAge: '87600h' }, secretRef: { name: 'pg' } }), [])
  })
})
