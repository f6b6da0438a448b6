import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { canonicalJson, itemHash, itemKey } from '../../../api/canonical.js'
import type { Item } from '../../../api/types.js'
import { diffItems, type ItemDiff } from '../../../sinks/diff.js'
import {
  addStoredRows, emptyHeld, headerInStep, heldFromRows, inventoryParams, ITEM_COLUMNS, KEY_COLUMNS, removedKeys, upsertChunks, type HeldRow, type StoredRow,
} from '../../../sinks/postgres/encode.js'
import { bumpReplicas, makeItem, makeItems, snapshotOf } from '../../support/items.js'

const INV = { namespace: 'team-a', name: 'prod-inventory' }

function heldRow(item: Item, hash = itemHash(item)): HeldRow {
  return { target_namespace: item.target.namespace, target_name: item.target.name, uid: item.uid, content_hash: hash }
}

function storedRow(item: Item, overrides: Partial<StoredRow> = {}): StoredRow {
  return {
    ...heldRow(item),
    api_group: item.group, api_version: item.version, kind: item.kind, namespace: item.namespace, name: item.name,
    attributes: item.attributes, stamped: true, ...overrides,
  }
}

/** One row of a chunk, by column name. */
function rowOf(columns: string[][], i: number): Record<string, string> {
  return Object.fromEntries(ITEM_COLUMNS.map(([name], c) => [name, columns[c]![i]!]))
}

describe('columns', () => {
  test('the unnest() order and types, and the key columns', () => {
    assert.deepEqual(ITEM_COLUMNS.map(([name, type]) => `${name}:${type}`), [
      'target_namespace:text', 'target_name:text', 'uid:text', 'api_group:text', 'api_version:text',
      'kind:text', 'namespace:text', 'name:text', 'attributes:jsonb', 'content_hash:text',
    ])
    assert.deepEqual([...KEY_COLUMNS], ['target_namespace', 'target_name', 'uid'])
  })

  test('inventoryParams are the scalar parameters of one export', () => {
    assert.deepEqual(inventoryParams(snapshotOf(INV, [], 'lab-west')), { cluster: 'lab-west', namespace: 'team-a', name: 'prod-inventory' })
  })
})

describe('upsertChunks', () => {
  const items = makeItems(5)
  const odd = makeItem(9, {
    group: '', namespace: '', name: `it's "odd" ü`,
    attributes: { z: 1, a: { y: [2, 1], b: "'; DROP TABLE x; --" } },
  })

  test('one row per item, every column in ITEM_COLUMNS order; values are data, never SQL', () => {
    const [columns, ...rest] = upsertChunks(diffItems(new Map(), [odd]), 100)
    assert.deepEqual(rest, [])
    assert.equal(columns!.length, ITEM_COLUMNS.length)
    assert.deepEqual(rowOf(columns!, 0), {
      target_namespace: 'team-a', target_name: 'prod-deploys', uid: odd.uid, api_group: '', api_version: 'v1', kind: 'Deployment',
      namespace: '', name: `it's "odd" ü`, attributes: '{"a":{"b":"\'; DROP TABLE x; --","y":[2,1]},"z":1}', content_hash: itemHash(odd),
    })
  })

  test('added rows come first, then changed; removed and unchanged items are not upserted', () => {
    const changed = bumpReplicas(items[1]!, 9)
    const diff = diffItems(new Map([items[0]!, items[1]!, items[2]!].map((i) => [itemKey(i), { hash: itemHash(i) }])), [items[4]!, changed, items[2]!, items[3]!])
    const [columns] = upsertChunks(diff, 100)
    assert.deepEqual(columns![2], [items[4]!.uid, items[3]!.uid, changed.uid], 'uid column: added in snapshot order, then changed')
    assert.equal(rowOf(columns!, 2).attributes, canonicalJson(changed.attributes))
    assert.equal(rowOf(columns!, 2).content_hash, itemHash(changed))
  })

  const sizes: { reason: string; n: number; chunkSize: number; want: number[] }[] = [
    { reason: 'no rows, no chunks', n: 0, chunkSize: 2, want: [] },
    { reason: 'fewer rows than a chunk', n: 3, chunkSize: 2000, want: [3] },
    { reason: 'exactly one chunk', n: 4, chunkSize: 4, want: [4] },
    { reason: 'a partial last chunk', n: 5, chunkSize: 2, want: [2, 2, 1] },
    { reason: 'one row per chunk', n: 3, chunkSize: 1, want: [1, 1, 1] },
  ]
  for (const c of sizes) {
    test(`chunking: ${c.reason}`, () => {
      const chunks = upsertChunks(diffItems(new Map(), items.slice(0, c.n)), c.chunkSize)
      assert.deepEqual(chunks.map((columns) => columns[0]!.length), c.want)
      for (const columns of chunks) assert.ok(columns.every((col) => col.length === columns[0]!.length), 'every column has one value per row')
      assert.deepEqual(chunks.flatMap((columns) => columns[2]!), items.slice(0, c.n).map((i) => i.uid), 'no row lost or repeated')
    })
  }

  test('the content hash is the one the diff computed', () => {
    const diff: ItemDiff = { added: [items[0]!], changed: [], removed: [], next: new Map([[itemKey(items[0]!), { hash: 'from-the-diff' }]]) }
    assert.equal(upsertChunks(diff, 10)[0]![9]![0], 'from-the-diff')
  })
})

describe('removedKeys', () => {
  const items = makeItems(3)

  test('key columns of the removed items, in removal order', () => {
    const held = heldFromRows(items.map((i) => heldRow(i)))
    const diff = diffItems(held.hashes, [items[1]!])
    assert.deepEqual(removedKeys(diff, held), [['team-a', 'team-a'], ['prod-deploys', 'prod-deploys'], [items[0]!.uid, items[2]!.uid]])
  })

  test('nothing removed: three empty columns', () => {
    const held = heldFromRows(items.map((i) => heldRow(i)))
    assert.deepEqual(removedKeys(diffItems(held.hashes, items), held), [[], [], []])
  })

  test('a removed key with no held row is a bug, not a silent skip', () => {
    const diff = diffItems(new Map([['team-a/prod-deploys/ghost', { hash: 'h' }]]), [])
    assert.throws(() => removedKeys(diff, emptyHeld()), /removed item team-a\/prod-deploys\/ghost has no held row/)
  })
})

describe('held state', () => {
  const items = makeItems(3)

  test('heldFromRows trusts the hash column', () => {
    const held = heldFromRows([heldRow(items[0]!), heldRow(items[1]!, 'whatever')])
    assert.deepEqual(held.hashes, new Map([[itemKey(items[0]!), { hash: itemHash(items[0]!) }], [itemKey(items[1]!), { hash: 'whatever' }]]))
    assert.deepEqual(held.keys.get(itemKey(items[1]!)), ['team-a', 'prod-deploys', items[1]!.uid])
  })

  const [A, B] = items as [Item, Item]
  const reordered = Object.fromEntries(Object.entries(A.attributes).reverse())
  const stored: { reason: string; row: StoredRow; intact: boolean }[] = [
    { reason: 'a row as written', row: storedRow(A), intact: true },
    { reason: 'attributes reordered by jsonb', row: storedRow(A, { attributes: reordered }), intact: true },
    { reason: 'an edited attribute', row: storedRow(A, { attributes: { ...A.attributes, replicas: 99 } }), intact: false },
    { reason: 'an edited identity column', row: storedRow(A, { kind: 'StatefulSet' }), intact: false },
    { reason: 'an edited hash column', row: storedRow(A, { content_hash: itemHash(B) }), intact: false },
    { reason: 'an export stamp that is not ours', row: storedRow(A, { stamped: false }), intact: false },
  ]
  for (const c of stored) {
    test(`addStoredRows: ${c.reason} is ${c.intact ? 'held as the item' : 'changed, so the write puts it back'}`, () => {
      const held = emptyHeld()
      addStoredRows(held, [c.row])
      const diff = diffItems(held.hashes, [A])
      assert.equal(diff.changed.length, c.intact ? 0 : 1)
      assert.equal(diff.added.length + diff.removed.length, 0)
      assert.deepEqual(held.keys.get(itemKey(A)), ['team-a', 'prod-deploys', A.uid])
    })
  }

  const snapshot = snapshotOf(INV, items)
  const headers: { reason: string; header: { checksum: string; item_count: number } | undefined; want: boolean }[] = [
    { reason: 'no snapshot row', header: undefined, want: false },
    { reason: 'this snapshot', header: { checksum: snapshot.checksum, item_count: 3 }, want: true },
    { reason: 'another checksum', header: { checksum: '0'.repeat(64), item_count: 3 }, want: false },
    { reason: 'another count', header: { checksum: snapshot.checksum, item_count: 2 }, want: false },
  ]
  for (const c of headers) test(`headerInStep: ${c.reason}`, () => assert.equal(headerInStep(c.header, snapshot), c.want))
})
