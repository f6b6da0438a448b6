import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { HeldReport, TargetStatus } from '../../../api/types.js'
import type { SyncResponse } from '../../../hooks/request.js'
import { spanDigest } from '../../../server/extraction/body-scan.js'
import { UnchangedSyncs } from '../../../server/extraction/unchanged.js'

const REPORT: HeldReport = { target: { namespace: 'team-a', name: 't' }, uid: 'u', generation: 1, checksum: 'c' }
const answer = (n: number): SyncResponse<TargetStatus> => ({ status: { extractedCount: n } as TargetStatus, children: [] })

test('the key is the GMAC of the bytes (as a span\'s), fed in any chunks: one byte apart is another key', () => {
  const cache = new UnchangedSyncs(10)
  const key = (...chunks: string[]) => {
    const hasher = cache.hasher()
    for (const chunk of chunks) hasher.update(Buffer.from(chunk))
    return hasher.digest()
  }
  const a = key('{"parent":{"a":1}}')
  const bytes = Buffer.from('{"parent":{"a":1}}')
  assert.equal(a, spanDigest(bytes, 0, bytes.length))
  assert.equal(key('{"par', 'ent":{"a"', ':1}}'), a)
  assert.notEqual(key('{"parent":{"a":2}}'), a)
})

test('at most maxEntries answers, the least recently used dropped first', () => {
  const cache = new UnchangedSyncs(2)
  cache.remember('a', answer(1), REPORT)
  cache.remember('b', answer(2), REPORT)
  assert.equal(cache.get('a')?.response.status.extractedCount, 1) // a is now the most recent
  cache.remember('c', answer(3), REPORT)
  assert.equal(cache.size, 2)
  assert.equal(cache.get('b'), undefined, 'b was the least recently used')
  assert.equal(cache.get('a')?.response.status.extractedCount, 1)
  assert.equal(cache.get('c')?.response.status.extractedCount, 3)
})

test('an answer older than 10 minutes is not reused, and is dropped', () => {
  let now = 0
  const cache = new UnchangedSyncs(10, () => now)
  cache.remember('a', answer(1), REPORT)
  now = 10 * 60_000
  assert.ok(cache.get('a'), 'exactly 10 minutes old: reused')
  now += 1
  assert.equal(cache.get('a'), undefined)
  assert.equal(cache.size, 0)
})

test('0 entries (KOLLECT_UNCHANGED_SYNCS=0) keeps nothing', () => {
  const cache = new UnchangedSyncs(0)
  assert.equal(cache.enabled, false)
  cache.remember('a', answer(1), REPORT)
  assert.equal(cache.size, 0)
})
