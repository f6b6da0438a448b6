import { test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { canonicalJson } from '../../../api/canonical.js'
import type { Item, JsonObject } from '../../../api/types.js'
import { ItemCharger } from '../../../exporter/budget.js'
import { makeItem } from '../../support/items.js'

// The charge is what the budget counts, so it must never be less than what holding the item
// costs on the wire (its JSON, which also bounds the report body) and must grow with every node,
// not only with the bytes of the JSON.

const withAttributes = (attributes: JsonObject, i = 1): Item => ({ ...makeItem(i), attributes })
const jsonBytes = (item: Item) => Buffer.byteLength(canonicalJson(item))

test('an item is charged at least its UTF-8 JSON length, for any attributes', () => {
  const text = fc.string({ unit: fc.constantFrom('a', '"', '\\', '\u0000', '\n', 'é', '\u4e00', '😀', '\ud800') })
  const json = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      fc.constant(null), fc.boolean(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), text, fc.array(tie('value')), fc.dictionary(text, tie('value')),
    ),
  })).value
  fc.assert(fc.property(fc.dictionary(text, json), (attributes) => {
    const item = withAttributes(attributes as JsonObject)
    const charge = new ItemCharger().charge(item)
    assert.ok(charge >= jsonBytes(item), `charged ${charge} for ${jsonBytes(item)} bytes of JSON: ${canonicalJson(item).slice(0, 200)}`)
  }), { numRuns: 300 })
})

test('structure costs more than its punctuation: 20,000 empty maps are charged far more than their 60 KB of JSON', () => {
  const empties = withAttributes({ l: Array.from({ length: 20_000 }, () => ({})) })
  const string = withAttributes({ s: 'x'.repeat(60_000) })
  const c = new ItemCharger()
  assert.ok(Math.abs(jsonBytes(empties) - jsonBytes(string)) < 1000)
  // V8 spends about 64 bytes on each empty map parsed from JSON, 1 byte per character of a string.
  assert.ok(c.charge(empties) >= 20_000 * 64, `${c.charge(empties)}`)
  assert.ok(c.charge(string) < 61_000 + 2_000, `${c.charge(string)}`)
})

test('a key sequence seen before costs its slots only; a new one pays for its hidden classes', () => {
  const c = new ItemCharger()
  const first = c.charge(withAttributes({ m: { alpha: 1, beta: 2 } }, 1))
  const again = c.charge(withAttributes({ m: { alpha: 1, beta: 2 } }, 1))
  const permuted = c.charge(withAttributes({ m: { beta: 2, alpha: 1 } }, 1))
  assert.ok(again < first, `${again} then ${first}`)
  assert.ok(permuted > again, 'another order of the same keys builds other hidden classes')
})

test('the charge of an item object is remembered: its later reports cost a lookup and the same bytes', () => {
  const c = new ItemCharger()
  const item = makeItem(7)
  const first = c.charge(item)
  assert.equal(c.charge(item), first)
  assert.ok(c.charge(structuredClone(item)) < first, 'a copy is charged again, now with known key sequences')
})
