import { test } from 'node:test'
import assert from 'node:assert/strict'
import { reportSequence } from '../../../server/hooks-app.js'

test('report sequences are wall-clock microseconds, strictly increasing even when the clock stalls or steps back', () => {
  const times = [1000, 1000, 1000, 999, 1002]
  const next = reportSequence(() => times.shift() as number)
  assert.deepEqual([next(), next(), next(), next(), next()], [1_000_000, 1_000_001, 1_000_002, 1_000_003, 1_002_000])
})
