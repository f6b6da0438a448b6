import { test } from 'node:test'
import assert from 'node:assert/strict'
import { loadConfig } from '../../../server/process/config.js'

const OPEN = { KOLLECT_HOOK_AUTH: 'none' }

test('leader election is off by default: one exporter, no API access', () => {
  assert.equal(loadConfig(OPEN).leaderElection, null)
})

test('on: client-go\'s timings, the pod as identity and namespace from the downward API', () => {
  assert.deepEqual(loadConfig({ ...OPEN, KOLLECT_LEADER_ELECTION: 'true', POD_NAME: 'kollect-7d9f-abcde', POD_NAMESPACE: 'ops' }).leaderElection, {
    name: 'kollect-exporter', namespace: 'ops', identity: 'kollect-7d9f-abcde', durationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000,
  })
  const explicit = loadConfig({
    ...OPEN, KOLLECT_LEADER_ELECTION: 'yes', KOLLECT_LEASE_NAME: 'x', KOLLECT_LEASE_NAMESPACE: 'y', KOLLECT_LEASE_IDENTITY: 'z', POD_NAME: 'p', POD_NAMESPACE: 'q',
  }).leaderElection
  assert.deepEqual([explicit?.name, explicit?.namespace, explicit?.identity], ['x', 'y', 'z'])
})

test('timings that would let two exporters write at once, or that a Lease cannot hold, refuse to start', () => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ KOLLECT_LEASE_DURATION_MS: '10000', KOLLECT_LEASE_RENEW_DEADLINE_MS: '10000' }, /DURATION_MS > KOLLECT_LEASE_RENEW_DEADLINE_MS/],
    [{ KOLLECT_LEASE_RENEW_DEADLINE_MS: '2000', KOLLECT_LEASE_RETRY_PERIOD_MS: '2000' }, /1\.2 × KOLLECT_LEASE_RETRY_PERIOD_MS/],
    [{ KOLLECT_LEASE_RETRY_PERIOD_MS: '0' }, /> 0/],
    [{ KOLLECT_LEASE_DURATION_MS: '15500' }, /whole number of seconds/],
  ]
  for (const [env, message] of cases) {
    assert.throws(() => loadConfig({ ...OPEN, KOLLECT_LEADER_ELECTION: 'true', ...env }), message, JSON.stringify(env))
  }
})
