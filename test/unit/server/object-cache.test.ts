import assert from 'node:assert/strict'
import { test } from 'node:test'
import { TargetTally } from '../../../hooks/target-tally.js'
import { ObjectCache, type CacheEntry } from '../../../server/extraction/object-cache.js'

// The kept records of incremental target syncs (issue 28): a byte budget, of which one
// namespace's targets hold at most a share, least recently used dropped first.

const entry = (namespace: string, bytes: number): CacheEntry => ({
  namespace, fingerprint: 'f', checksum: 'c', known: { members: [], spans: [] }, records: new Map(), bytes, at: 0, useful: true,
  tallied: new TargetTally<string>().finish(),
})

test("a namespace past its share drops its own least recently used targets, never another namespace's", () => {
  const cache = new ObjectCache(1000, 0.5)
  assert.equal(cache.set('b/1/u', entry('b', 300)), true)
  assert.equal(cache.set('a/1/u', entry('a', 200)), true)
  assert.equal(cache.set('a/2/u', entry('a', 200)), true)
  cache.get('a/1/u')
  // a: 200 + 200 + 200 > 500: the least recently used of a's goes (a/2), b stays.
  assert.equal(cache.set('a/3/u', entry('a', 200)), true)
  assert.deepEqual(['a/1/u', 'a/2/u', 'a/3/u', 'b/1/u'].map((k) => cache.get(k) !== undefined), [true, false, true, true])
  assert.equal(cache.bytes, 700)
})

test('an entry past the share is not kept, and replaces nothing but its own target', () => {
  const cache = new ObjectCache(1000, 0.25)
  cache.set('a/1/u', entry('a', 100))
  cache.set('a/2/u', entry('a', 100))
  assert.equal(cache.set('a/2/u', entry('a', 251)), false)
  assert.equal(cache.get('a/2/u'), undefined, 'its old records no longer hold for it')
  assert.notEqual(cache.get('a/1/u'), undefined)
  assert.equal(cache.bytes, 100)
})

test('past the whole budget the least recently used target of any namespace goes', () => {
  const cache = new ObjectCache(1000, 0.5)
  cache.set('a/1/u', entry('a', 400))
  cache.set('b/1/u', entry('b', 400))
  cache.get('a/1/u')
  cache.set('c/1/u', entry('c', 400))
  assert.deepEqual(['a/1/u', 'b/1/u', 'c/1/u'].map((k) => cache.get(k) !== undefined), [true, false, true])
  assert.equal(cache.bytes, 800)
})

test('0 bytes turns it off', () => {
  const cache = new ObjectCache(0, 0.25)
  assert.equal(cache.enabled, false)
  assert.equal(cache.set('a/1/u', entry('a', 1)), false)
})
