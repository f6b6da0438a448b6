import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { canonicalJsonPretty, itemKey } from '../../../api/canonical.js'
import { diffItems } from '../../../sinks/diff.js'
import { heldFromItems } from '../../../sinks/document.js'
import { resolveGitSettings } from '../../../sinks/git/config.js'
import {
  envelopePath, groupByShard, parseShard, planSharded, renderEnvelope, renderShard, renderSharded, shardedDrift, shardedFiles, shardOf, shardOfPath, shardPath,
} from '../../../sinks/git/shards.js'
import { bumpReplicas, makeItems, snapshotOf } from '../../support/items.js'

const INV = { namespace: 'team-a', name: 'prod-inventory' }
const DIR = 'inventory/lab-west/team-a/prod-inventory'

describe('shardOf', () => {
  test('is fixed: the same key lands in the same shard in every release', () => {
    // FNV-1a of these keys; a change here moves every item of every sharded repository.
    assert.equal(shardOf('team-a/prod/uid-1', 16), 0x96808c99 % 16)
    assert.deepEqual(['a', 'b', 'team-a/prod/uid-1'].map((key) => shardOf(key, 1024)), [0xe40c292c % 1024, 0xe70c2de5 % 1024, 0x96808c99 % 1024])
  })

  test('spreads 10,000 item keys over 16 shards within 15% of even', () => {
    const counts = new Array<number>(16).fill(0)
    for (const item of makeItems(10_000)) counts[shardOf(itemKey(item), 16)]!++
    for (const n of counts) assert.ok(Math.abs(n - 625) < 625 * 0.15, `shard sizes ${counts.join(' ')}`)
  })
})

describe('shard files', () => {
  test('named with their count, zero-padded to sort; an envelope beside them', () => {
    assert.equal(shardPath(DIR, 3, 16), `${DIR}/items-03-of-16.json`)
    assert.equal(shardPath(DIR, 3, 1000), `${DIR}/items-003-of-1000.json`)
    assert.deepEqual(shardedFiles(DIR, 2), [`${DIR}/inventory.json`, `${DIR}/items-0-of-2.json`, `${DIR}/items-1-of-2.json`])
    assert.deepEqual(shardOfPath(DIR, `${DIR}/items-03-of-16.json`), { shard: 3, shards: 16 })
    for (const stray of [`${DIR}/items-3-of-16.json`, `${DIR}/items-16-of-16.json`, `${DIR}/inventory.json`, `${DIR}x/items-03-of-16.json`]) {
      assert.equal(shardOfPath(DIR, stray), undefined, stray)
    }
  })

  test('a shard reads like the document: canonical JSON, and only its own items are held from it', () => {
    const items = makeItems(40)
    const groups = groupByShard(items, 4)
    const text = renderShard(groups.get(1) ?? [], 1, 4)
    assert.equal(text, canonicalJsonPretty({ items: groups.get(1), shard: 1, shards: 4 }))
    assert.deepEqual(parseShard(text, 1, 4), groups.get(1))
    assert.equal(parseShard(text, 2, 4), undefined, 'another shard')
    assert.equal(parseShard(text, 1, 8), undefined, 'another count')
    const misplaced = canonicalJsonPretty({ items: [...(groups.get(1) ?? []), ...(groups.get(2) ?? [])], shard: 1, shards: 4 })
    assert.deepEqual(parseShard(misplaced, 1, 4), groups.get(1))
    assert.equal(parseShard('not json', 1, 4), undefined)
  })

  test('the envelope is the document without its items, and the count', () => {
    const snapshot = snapshotOf(INV, makeItems(3))
    const { items: _items, ...rest } = snapshot
    assert.equal(renderEnvelope(snapshot, 4), canonicalJsonPretty({ ...rest, shards: 4 }))
  })
})

describe('planSharded', () => {
  const items = makeItems(200)
  const snapshot = snapshotOf(INV, items)
  const all = new Set(shardedFiles(DIR, 8))

  test('the first export writes every shard and the envelope', () => {
    const plan = planSharded(DIR, snapshot, diffItems(new Map(), snapshot.items), new Set(), 8)
    assert.deepEqual([...plan.write.keys()].sort(), [...all].sort())
    assert.deepEqual(plan.remove, [])
    assert.equal(plan.write.get(envelopePath(DIR)), renderEnvelope(snapshot, 8))
  })

  test('a 1-item change writes its shard and the envelope', () => {
    const next = snapshotOf(INV, items.map((it, i) => (i === 17 ? bumpReplicas(it, 5) : it)))
    const plan = planSharded(DIR, next, diffItems(heldFromItems(items), next.items), all, 8)
    const shard = shardOf(itemKey(items[17]!), 8)
    assert.deepEqual([...plan.write.keys()].sort(), [envelopePath(DIR), shardPath(DIR, shard, 8)].sort())
    assert.equal(plan.write.get(shardPath(DIR, shard, 8)), renderSharded(DIR, next, 8).get(shardPath(DIR, shard, 8)))
  })

  test('a removed item rewrites the shard it was in; files of another count and strays go', () => {
    const next = snapshotOf(INV, items.slice(1))
    const held = new Set([...all, shardPath(DIR, 0, 3), `${DIR}/notes.txt`])
    const plan = planSharded(DIR, next, diffItems(heldFromItems(items), next.items), held, 8)
    assert.deepEqual([...plan.write.keys()].sort(), [envelopePath(DIR), shardPath(DIR, shardOf(itemKey(items[0]!), 8), 8)].sort())
    assert.deepEqual(plan.remove?.sort(), [shardPath(DIR, 0, 3), `${DIR}/notes.txt`].sort())
  })
})

describe('shardedDrift', () => {
  const items = makeItems(60)
  const snapshot = snapshotOf(INV, items)
  const rendered = renderSharded(DIR, snapshot, 4)
  const ids = new Map([...rendered.keys()].map((file) => [file, 'id']))

  test('in step: nothing differs, nothing planned', () => {
    assert.deepEqual(shardedDrift(DIR, snapshot, 4, rendered, new Set(), new Map(), ids), { differences: 0, examples: [], plan: { write: new Map(), remove: [] } })
  })

  test('an edited item counts once, a shard changed only in layout once, the envelope once, a stray once', () => {
    const edited = shardPath(DIR, shardOf(itemKey(items[5]!), 4), 4)
    const at = shardOfPath(DIR, edited)!
    const groups = groupByShard(items, 4)
    const handEdited = renderShard((groups.get(at.shard) ?? []).map((it) => (it === items[5] ? bumpReplicas(it, 77) : it)), at.shard, at.shards)
    const reformatted = shardPath(DIR, (at.shard + 1) % 4, 4)
    const held = new Map([[edited, handEdited], [reformatted, JSON.stringify(JSON.parse(rendered.get(reformatted)!))]])
    const stray = `${DIR}/stray.json`
    const differing = new Set([edited, reformatted, envelopePath(DIR)])
    const drift = shardedDrift(DIR, snapshot, 4, rendered, differing, held, new Map([...ids, [stray, 'x']]))
    assert.equal(drift.differences, 4)
    assert.deepEqual(new Set(drift.examples), new Set([itemKey(items[5]!), reformatted, envelopePath(DIR), stray]))
    assert.deepEqual([...drift.plan.write.keys()].sort(), [...differing].sort())
    assert.deepEqual(drift.plan.remove, [stray])
  })
})

describe('git settings: layout and shards', () => {
  const label = { kind: 'git', id: 'team-a/git' } as const
  const settings = (git: Record<string, unknown>) => resolveGitSettings({ type: 'git', git }, {}, label)

  test('sharded with 16 shards unless told', () => {
    assert.equal(settings({ layout: 'sharded' }).shards, 16)
    assert.equal(settings({ layout: 'sharded', shards: 64 }).shards, 64)
  })

  test('a count that is not a whole number from 1 to 1024 is a permanent error', () => {
    for (const shards of [0, -1, 1.5, 1025, Number.NaN]) {
      assert.throws(() => settings({ layout: 'sharded', shards }), (err: Error & { retriable?: boolean }) => /shards must be a whole number from 1 to 1024/.test(err.message) && err.retriable === false, String(shards))
    }
    assert.throws(() => settings({ layout: 'chunked' }), /layout must be "document", "perResource" or "sharded"/)
  })
})
