import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { itemHash, itemKey } from '../../../api/canonical.js'
import type { Item, TargetReport } from '../../../api/types.js'
import { TargetStore } from '../../../exporter/targets.js'
import { bumpReplicas } from '../../support/items.js'
import { itemsOf, report, T1 } from './harness.js'

// Issue 28: a report of changes (TargetReport.base) must leave the exporter exactly where the
// whole report would: the same held items, the same answer (stale items counted the same), the
// same "changed" verdict, through any sequence of changes, failures and older generations.

const POOL = itemsOf(T1, 8)

/** One sync's objects: per pool item, absent, failed, or present with a value and a generation. */
const step = fc.array(fc.oneof(fc.constant('absent' as const), fc.constant('failed' as const), fc.tuple(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 1, max: 3 }))), {
  minLength: POOL.length, maxLength: POOL.length,
})

function wholeReport(objects: (typeof step extends fc.Arbitrary<infer T> ? T : never), sequence: number): TargetReport {
  const present: { item: Item; generation: number }[] = []
  const failed: string[] = []
  objects.forEach((o, i) => {
    const base = POOL[i] as Item
    if (o === 'failed') failed.push(itemKey(base))
    else if (o !== 'absent') present.push({ item: bumpReplicas(base, o[0]), generation: o[1] })
  })
  const r = report(T1, present.map((p) => p.item), failed)
  return { ...r, uid: 'u', sequence, itemHashes: r.items.map(itemHash), itemGenerations: present.map((p) => p.generation) }
}

/** What the hooks send instead of next, knowing they sent last. */
function changesOf(last: TargetReport, next: TargetReport): TargetReport {
  const before = new Map(last.items.map((item, i) => [itemKey(item), { hash: last.itemHashes?.[i], generation: last.itemGenerations?.[i] }]))
  const now = new Set(next.items.map(itemKey))
  const changed = next.items.map((item, i) => ({ item, i })).filter(({ item, i }) => {
    const b = before.get(itemKey(item))
    return !b || b.hash !== next.itemHashes?.[i] || b.generation !== next.itemGenerations?.[i]
  })
  return {
    ...next, base: last.checksum,
    items: changed.map((c) => c.item), itemHashes: changed.map((c) => next.itemHashes?.[c.i] as string),
    itemGenerations: changed.map((c) => next.itemGenerations?.[c.i] ?? null),
    removedKeys: [...before.keys()].filter((k) => !now.has(k)),
  }
}

const held = (store: TargetStore) => (store.has(T1) ? [...store.items(T1)] : []).map((i) => JSON.stringify(i)).sort()

/** A store whose budget holds about five of the pool's items, and the bytes it holds. */
function store(maxBytes?: number): { store: TargetStore; held: () => number } {
  let bytes = 0
  const budget = maxBytes === undefined ? undefined : { maxBytes, namespaceShare: 1 }
  return { store: new TargetStore(budget, { onHeldChange: (_ns, _n, total) => { bytes = total } }, () => undefined), held: () => bytes }
}

// The pool's items are charged about 1,050 bytes each: a budget of 5,500 refuses the syncs that hold more than five.
for (const maxBytes of [undefined, 5_500]) {
  test(`a report of changes leaves the exporter where the whole report would, through any sequence of syncs (budget ${maxBytes ?? 'none'})`, () => {
    let refused = 0
    fc.assert(fc.property(fc.array(step, { minLength: 2, maxLength: 8 }), (syncs) => {
      const whole = store(maxBytes)
      const changes = store(maxBytes)
      let last: TargetReport | undefined
      syncs.forEach((objects, n) => {
        const next = wholeReport(objects, n + 1)
        const a = whole.store.report(next)
        const b = changes.store.report(last ? changesOf(last, next) : next)
        assert.deepEqual(b, a, `sync ${n}`)
        // A refused report of changes is put back: the held items, and what they are charged, are the whole report's.
        assert.deepEqual(held(changes.store), held(whole.store), `sync ${n}`)
        assert.equal(changes.held(), whole.held(), `sync ${n}: bytes held`)
        if (a.result.accepted) last = next
        else if (a.result.reason === 'ResourceLimit') refused++
      })
    }), { numRuns: 300 })
    if (maxBytes !== undefined) assert.ok(refused > 0, 'some syncs were refused')
  })
}
