import assert from 'node:assert/strict'
import { test } from 'node:test'
import { canonicalJson, itemHash } from '../../../api/canonical.js'
import type { Item } from '../../../api/types.js'
import { SharedStrings } from '../../../exporter/shared-strings.js'
import { heapPerElement } from '../../support/heap.js'
import { composition, expected, harness, itemsOf, LIMIT, report, T1 } from './harness.js'

/** Items as they arrive from the hooks: fresh objects parsed from JSON, each with its own target. */
const fromWire = (items: Item[]): Item[] => JSON.parse(JSON.stringify(items)) as Item[]

test('held items share their target and strings, and the snapshot is exactly what was reported', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition({ debounceMs: 1_000 }))
  const items = itemsOf(T1, 50)
  await exporter.reportTarget(report(T1, fromWire(items)))
  clock.advance(1_000)
  await exporter.idle()
  const written = factory.sink('team-a/primary').lastWrite?.snapshot
  assert.deepEqual(written, expected(items))
  assert.equal(new Set(written?.items.map((i) => i.target)).size, 1, 'one target object for the items of one report')
})

test('a report is answered before its items\' strings are shared, which then happens a slice per turn of the event loop', LIMIT, async (t) => {
  const { exporter } = harness(t)
  const n = 20_000
  const items = fromWire(itemsOf(T1, n))
  const targets = () => new Set(items.map((i) => i.target)).size
  await exporter.reportTarget(report(T1, items))
  assert.equal(targets(), n, 'each item still has the target object it was parsed with')
  const turn = () => new Promise((resolve) => setImmediate(resolve))
  await turn()
  assert.ok(targets() > 1 && targets() < n, `one slice shared after one turn (${targets()} target objects)`)
  for (let i = 0; i < 3; i++) await turn()
  assert.equal(targets(), 1, 'every held item points at one target object')
})

test('sharing changes no value: hostile keys, long strings and more distinct strings than the table holds', () => {
  const strings = new SharedStrings()
  const items = fromWire(itemsOf(T1, 3).map((it, i) => ({
    ...it,
    attributes: {
      ...it.attributes,
      many: Array.from({ length: 20_000 }, (_, k) => `distinct-string-${i}-${k}`),
      long: 'x'.repeat(10_000),
      nested: [[{ deep: ['registry.example.com/sidecars/envoy:1.29.1'] }]],
    },
  })))
  Object.defineProperty(items[0]?.attributes, '__proto__', { value: 'a key, not a prototype', enumerable: true, writable: true, configurable: true })
  const before = items.map((it) => [canonicalJson(it), itemHash(it)])
  for (const item of items) strings.share(item, T1)
  assert.deepEqual(items.map((it) => canonicalJson(it)), before.map(([json]) => json))
  assert.deepEqual(items.map((it) => itemHash(it)), before.map(([, hash]) => hash), 'a hash cached by identity stays true')
  assert.equal(Object.getPrototypeOf(items[0]?.attributes), Object.prototype)
})

test('items held with shared strings take less heap than as parsed', () => {
  const n = 20_000
  const wire = JSON.stringify(itemsOf(T1, n))
  const parsed = heapPerElement(n, () => JSON.parse(wire) as Item[])
  const strings = new SharedStrings()
  const shared = heapPerElement(n, () => {
    const items = JSON.parse(wire) as Item[]
    for (const item of items) strings.share(item, T1)
    return items
  })
  // Measured: about 1,460 bytes an item as parsed, 330 fewer shared (the repeated image, reasons, target).
  assert.ok(parsed - shared >= 150, `parsed ${parsed.toFixed(0)} B/item, shared ${shared.toFixed(0)} B/item`)
})
