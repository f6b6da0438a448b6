import { test } from 'node:test'
import assert from 'node:assert/strict'
import { loadConfig } from '../../../server/process/config.js'

// Issue 24, F13: the cluster label becomes part of keys, paths, rows and subjects, so the default
// label follows KollectSink.spec.cluster's rule, as a hub's clusters do.

const OPEN = { KOLLECT_HOOK_AUTH: 'none' }

test('KOLLECT_CLUSTER follows the KollectSink cluster rule; "default" when unset', () => {
  assert.equal(loadConfig(OPEN).cluster, 'default')
  assert.equal(loadConfig({ ...OPEN, KOLLECT_CLUSTER: 'Lab-West_2.eu' }).cluster, 'Lab-West_2.eu')
})

test('a label with "/" (or that the pattern refuses) stops the start, with one line naming the variable', () => {
  for (const bad of ['prod/eu', '', 'east ', '-east', 'a'.repeat(64)]) {
    assert.throws(() => loadConfig({ ...OPEN, KOLLECT_CLUSTER: bad }), (err: Error) => /^KOLLECT_CLUSTER: ".*" is not a cluster label: [^\n]*$/.test(err.message), bad)
  }
})
