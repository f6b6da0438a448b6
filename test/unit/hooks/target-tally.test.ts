import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { retally, TargetTally, type ItemRecord, type ObjectRecord, type Tallied } from '../../../hooks/target-tally.js'

// An incremental resync tallies what changed from the last tally (retally) instead of every
// object again. It must give exactly what tallying every record gives, or null.

type Records = Map<string, ObjectRecord<string>>

/** An object's record: key "ns/name", an item whose order is its identity (uid from the key) unless unmatched. */
function record(key: string, version: number, shape: { matched: boolean; failure?: boolean }): ObjectRecord<string> {
  const [namespace, name] = key.split('/') as [string, string]
  const r: ObjectRecord<string> = { matched: shape.matched }
  if (shape.failure) r.failure = `bad ${key}`
  if (shape.matched) {
    r.item = { value: `{"v":${version}}`, hash: `h-${key}-${version}`, order: ['apps', 'v1', 'Deployment', namespace, name, `uid-${key}`], generation: version, bytes: 10 + version }
  }
  return r
}

function tallyAll(records: Records): Tallied<string> {
  const tally = new TargetTally<string>()
  for (const key of [...records.keys()].sort()) tally.add(key, records.get(key) as ObjectRecord<string>)
  return tally.finish()
}

/** What retally gets for a change from before to now: the replaced and gone records, and the new ones. */
function diff(before: Records, now: Records): { replaced: ObjectRecord<string>[]; fresh: ObjectRecord<string>[] } {
  const replaced: ObjectRecord<string>[] = []
  const fresh: ObjectRecord<string>[] = []
  for (const [key, r] of before) if (now.get(key) !== r) replaced.push(r)
  for (const [key, r] of now) if (before.get(key) !== r) fresh.push(r)
  return { replaced, fresh }
}

const keys = fc.uniqueArray(fc.tuple(fc.constantFrom('a', 'b', 'team-c'), fc.integer({ min: 0, max: 60 })).map(([ns, n]) => `${ns}/web-${n}`), { maxLength: 40 })
const shape = fc.record({ matched: fc.boolean(), failure: fc.boolean() })

describe('retally', () => {
  test('gives what a whole tally gives, after any changes, additions and removals without failures', () => {
    fc.assert(fc.property(keys, keys, fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }), (first, added, changes) => {
      const before: Records = new Map(first.map((k, i) => [k, record(k, 1, { matched: i % 5 !== 0 })]))
      const now: Records = new Map()
      first.forEach((k, i) => {
        if (changes[i] === undefined || i % 7 === 3) return // gone
        now.set(k, changes[i] ? record(k, 2, { matched: i % 3 !== 0 }) : (before.get(k) as ObjectRecord<string>))
      })
      for (const k of added) if (!now.has(k)) now.set(k, record(k, 3, { matched: true }))
      const { replaced, fresh } = diff(before, now)
      const got = retally(tallyAll(before), replaced, fresh)
      assert.deepEqual(got, tallyAll(now))
    }))
  })

  test('declines (null) when a failure is among the records, so that lastError stays the first in key order', () => {
    fc.assert(fc.property(keys.filter((k) => k.length > 1), shape, fc.boolean(), (ks, s, failBefore) => {
      const before: Records = new Map(ks.map((k, i) => [k, record(k, 1, { matched: true, failure: failBefore && i === 0 })]))
      const now: Records = new Map(before)
      const last = ks[ks.length - 1] as string
      now.set(last, record(last, 2, { matched: s.matched, failure: s.failure }))
      const { replaced, fresh } = diff(before, now)
      const got = retally(tallyAll(before), replaced, fresh)
      if (failBefore || s.failure) assert.equal(got, null)
      else assert.deepEqual(got, tallyAll(now))
    }))
  })

  test('declines when two items would sort the same, whose order only a whole tally knows', () => {
    const before: Records = new Map([['a/web-1', record('a/web-1', 1, { matched: true })]])
    const twin = record('a/web-2', 1, { matched: true })
    ;(twin.item as { order: ItemRecord<string>['order'] }).order = (before.get('a/web-1')?.item as ItemRecord<string>).order
    assert.equal(retally(tallyAll(before), [], [twin]), null)
  })
})
