import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import type { KubeObject } from '../../api/types.js'
import { startHooksServer, type HooksServer } from '../support/hooks-server.js'
import { deployment } from '../support/metacontroller.js'
import { ROUTES, conditionOf, oneAttributeSync, send, statusOf } from './support.js'

// Issue 24, F8: the per-object bound on attribute values counted only characters and containers,
// so a list shared 30,000 times over 30,000 numbers (900 million leaves once serialised, a few
// hundred KiB of request) walked to the sync deadline and cost a child process; the same with
// one-letter strings stopped at once. Every leaf counts now, whatever its type.

const DEADLINE_MS = 8000
const LIMIT_MESSAGE = /^extraction stopped: attribute x: the attribute values of one object have more than 4194304 elements and characters$/
let server: HooksServer

before(async () => {
  server = await startHooksServer({ KOLLECT_SYNC_TIMEOUT_MS: String(DEADLINE_MS), KOLLECT_EXTRACT_WORKERS: '2' })
})
after(async () => {
  await server.close()
})

function withLeaves(leaf: unknown): KubeObject {
  const d = deployment(1)
  ;(d['spec'] as Record<string, unknown>)['l'] = Array.from({ length: 30_000 }, () => leaf)
  return d
}

for (const [kind, leaf] of [['zeros', 0], ['booleans', true], ['nulls', null], ['one-letter strings', 'a'], ['empty maps', {}]] as const) {
  test(`a list of 30,000 ${kind} shared 30,000 times stops with ResourceLimit, and no child process is lost`, async () => {
    const pids = server.app.extractPool.pids()
    const res = await send(server.url, ROUTES.targetSync, { body: oneAttributeSync('object.spec.l.map(x, object.spec.l)', [withLeaves(leaf)]) })
    assert.equal(res.status, 200, res.text)
    const ready = conditionOf(res, 'Ready')
    assert.deepEqual([ready?.status, ready?.reason], ['False', 'ResourceLimit'], JSON.stringify(ready))
    assert.match(ready?.message ?? '', LIMIT_MESSAGE)
    assert.deepEqual([statusOf(res).extractedCount, statusOf(res).checksum], [0, ''])
    // A sync that ran to the deadline would have had its child killed and replaced.
    assert.deepEqual(server.app.extractPool.pids(), pids)
  })
}

test('values within the bound still extract: 30,000 zeros read once', async () => {
  const res = await send(server.url, ROUTES.targetSync, { body: oneAttributeSync('object.spec.l', [withLeaves(0)]) })
  assert.equal(res.status, 200, res.text)
  assert.deepEqual([conditionOf(res, 'Ready')?.reason, statusOf(res).extractedCount], ['Extracted', 1])
})
