import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { itemHash, itemKey } from '../../../api/canonical.js'
import type { Item } from '../../../api/types.js'
import { diffItems, isEmptyDiff, type HeldItem } from '../../../sinks/diff.js'
import { bumpReplicas, makeItem, makeItems } from '../../support/items.js'

function held(items: readonly Item[], keep = false): Map<string, HeldItem> {
  return new Map(items.map((item) => [itemKey(item), keep ? { hash: itemHash(item), item } : { hash: itemHash(item) }]))
}

const [A, B, C] = makeItems(3) as [Item, Item, Item]
const B2 = bumpReplicas(B, 42)

describe('diffItems', () => {
  const cases: { reason: string; held: Item[]; items: Item[]; want: { added: Item[]; changed: Item[]; removed: Item[] } }[] = [
    { reason: 'nothing held and nothing exported', held: [], items: [], want: { added: [], changed: [], removed: [] } },
    { reason: 'a first export adds every item, in snapshot order', held: [], items: [C, A], want: { added: [C, A], changed: [], removed: [] } },
    { reason: 'the same items are no change', held: [A, B], items: [A, B], want: { added: [], changed: [], removed: [] } },
    { reason: 'an equal copy (another object) is no change', held: [A], items: [structuredClone(A)], want: { added: [], changed: [], removed: [] } },
    { reason: 'a changed attribute is a change', held: [A, B], items: [A, B2], want: { added: [], changed: [B2], removed: [] } },
    { reason: 'an item gone from the snapshot is removed', held: [A, B, C], items: [B], want: { added: [], changed: [], removed: [A, C] } },
    { reason: 'an empty snapshot removes everything held', held: [A, B], items: [], want: { added: [], changed: [], removed: [A, B] } },
    { reason: 'added, changed and removed at once', held: [A, B], items: [B2, C], want: { added: [C], changed: [B2], removed: [A] } },
    {
      reason: 'a new uid under the same name is a removal and an addition (identity is target + uid)',
      held: [A], items: [{ ...A, uid: 'recreated' }], want: { added: [{ ...A, uid: 'recreated' }], changed: [], removed: [A] },
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const d = diffItems(held(c.held), c.items)
      assert.deepEqual(d.added, c.want.added)
      assert.deepEqual(d.changed.map((x) => x.after), c.want.changed)
      assert.deepEqual(d.removed.map((x) => x.key), c.want.removed.map(itemKey))
      assert.deepEqual(d.next, held(c.items), 'next is exactly the new state')
      assert.equal(isEmptyDiff(d), c.want.added.length + c.want.changed.length + c.want.removed.length === 0)
    })
  }

  test('without keepItems, before is whatever the held map carried; with it, next carries the items', () => {
    const bare = diffItems(held([A, B]), [B2])
    assert.deepEqual(bare.changed, [{ before: undefined, after: B2 }])
    assert.deepEqual(bare.removed, [{ key: itemKey(A), before: undefined }])
    const kept = diffItems(held([A, B], true), [B2], true)
    assert.deepEqual(kept.changed, [{ before: B, after: B2 }])
    assert.deepEqual(kept.removed, [{ key: itemKey(A), before: A }])
    assert.equal(kept.next.get(itemKey(B2))?.item, B2)
  })

  test('a held hash that no item has (a tampered row) counts as changed', () => {
    const d = diffItems(new Map([[itemKey(A), { hash: 'tampered' }]]), [A])
    assert.deepEqual(d.changed.map((x) => x.after), [A])
  })

  test('items under another target are distinct from the same object under this one', () => {
    const other = makeItem(0, { target: { namespace: 'team-b', name: 'other' } })
    const d = diffItems(held([A]), [A, other])
    assert.deepEqual(d.added, [other])
  })
})
