import { test } from 'node:test'
import assert from 'node:assert/strict'
import { reportSequence } from '../../../server/http/hooks-app.js'

test('report sequences are wall-clock microseconds, strictly increasing even when the clock stalls or steps back', () => {
  const times = [1000, 1000, 1000, 999, 1002]
  const next = reportSequence(() => times.shift() as number)
  assert.deepEqual([next(), next(), next(), next(), next()], [1_000_000, 1_000_001, 1_000_002, 1_000_003, 1_002_000])
})

test('replicas stamp from the wall clock alone: syncs of one target order by arrival, whichever replica took each', () => {
  let wall = 5_000
  const replicas = [reportSequence(() => wall), reportSequence(() => wall), reportSequence(() => wall)]
  // A burst of other targets' syncs on replica 0 within one millisecond runs its counter ahead…
  for (let i = 0; i < 50; i++) replicas[0]?.()
  // …yet one target's syncs, a millisecond or more apart (each waits for the last's answer), order
  // by arrival round robin over the replicas, a replica's fresh process included.
  const stamps: number[] = []
  for (let i = 0; i < 9; i++) {
    wall += 1 + (i % 3)
    stamps.push((i === 4 ? reportSequence(() => wall) : (replicas[i % 3] as () => number))())
  }
  assert.deepEqual([...stamps].sort((a, b) => a - b), stamps)
  assert.equal(new Set(stamps).size, stamps.length)
})
