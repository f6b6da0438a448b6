import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { canonicalJsonPretty, itemKey } from '../../../api/canonical.js'
import type { Item, Snapshot } from '../../../api/types.js'
import { diffItems } from '../../../sinks/diff.js'
import { heldFromItems, itemPath, renderItem, renderSnapshot } from '../../../sinks/document.js'
import { blobId, documentDrift, resourceDrift, type ObjectFormat } from '../../../sinks/git/drift.js'
import { managedPath, planFiles, removeMessage, repairMessage, writeMessage } from '../../../sinks/git/encode.js'
import { bumpReplicas, makeItem, makeItems, snapshotOf } from '../../support/items.js'

const INV = { namespace: 'team-a', name: 'prod-inventory' }
const DOC = 'inventory/lab-west/team-a/prod-inventory.json'
const DIR = 'inventory/lab-west/team-a/prod-inventory'

describe('managedPath', () => {
  const TEMPLATE = 'inventory/{cluster}/{namespace}/{name}.json'
  const cases: { reason: string; path: string; layout: 'document' | 'perResource'; template?: string; want: string }[] = [
    { reason: 'document: the document itself', path: DOC, layout: 'document', want: DOC },
    { reason: 'perResource: the document path without its extension', path: DOC, layout: 'perResource', want: DIR },
    { reason: 'perResource: a YAML template too', path: 'inv/prod.yaml', layout: 'perResource', template: 'inv/{name}.yaml', want: 'inv/prod' },
    { reason: 'perResource: a dotted name keeps its dots before the extension', path: 'inv/web.prod.json', layout: 'perResource', template: 'inv/{name}.json', want: 'inv/web.prod' },
    { reason: 'perResource: a path without an extension is the directory', path: 'inv/prod', layout: 'perResource', template: 'inv/{name}', want: 'inv/prod' },
  ]
  for (const c of cases) test(c.reason, () => assert.equal(managedPath(c.path, c.layout, c.template ?? TEMPLATE), c.want))

  // An extensionless template renders "web.prod" and "web.staging" to paths whose last dots are
  // data: they once both owned "inventory/lab/team-a/web", each export pruning the other's files.
  test('perResource: two inventories with dotted names never share a directory', () => {
    const dirs = ['web', 'web.prod', 'web.staging'].map((name) => managedPath(`inventory/lab/team-a/${name}`, 'perResource', 'inventory/{cluster}/{namespace}/{name}'))
    assert.equal(new Set(dirs).size, 3, `directories ${JSON.stringify(dirs)}`)
  })
})

describe('itemPath', () => {
  const cases: { reason: string; item: Item; want: string }[] = [
    { reason: 'target, group, kind, namespace, name', item: makeItem(1), want: `${DIR}/team-a/prod-deploys/apps/Deployment/team-b/svc-000001.json` },
    { reason: 'the core group is spelled "core"', item: makeItem(1, { group: '', kind: 'ConfigMap' }), want: `${DIR}/team-a/prod-deploys/core/ConfigMap/team-b/svc-000001.json` },
    { reason: 'a cluster-scoped object sits under "_cluster"',
      item: makeItem(1, { kind: 'Namespace', group: '', namespace: '' }), want: `${DIR}/team-a/prod-deploys/core/Namespace/_cluster/svc-000001.json` },
    {
      reason: 'every part is one escaped segment',
      item: makeItem(1, { target: { namespace: 'a/b', name: '..' }, group: 'x.io', name: 'a b"é' }),
      want: `${DIR}/a%2Fb/%2E%2E/x.io/Deployment/team-b/a%20b%22%C3%A9.json`,
    },
  ]
  for (const c of cases) test(c.reason, () => assert.equal(itemPath(DIR, c.item), c.want))
})

describe('planFiles', () => {
  const items = makeItems(4)
  const before = items.slice(0, 3)
  const changed = bumpReplicas(items[1]!, 9)
  const snapshot = snapshotOf(INV, [changed, items[2]!, items[3]!])
  const diff = diffItems(heldFromItems(before), snapshot.items)

  test('document: one file, the rendered snapshot, nothing pruned', () => {
    const plan = planFiles(DOC, { layout: 'document', shards: 16 }, snapshot, () => diff)
    assert.deepEqual(plan, { write: new Map([[DOC, renderSnapshot(snapshot)]]) })
  })

  test('perResource: writes only added and changed items, keeps every item, prunes the rest of the directory', () => {
    const plan = planFiles(DIR, { layout: 'perResource', shards: 16 }, snapshot, () => diff)
    assert.deepEqual(plan.write, new Map([
      [itemPath(DIR, items[3]!), renderItem(items[3]!)],
      [itemPath(DIR, changed), renderItem(changed)],
    ]))
    assert.deepEqual(plan.prune, { dir: DIR, keep: new Set(snapshot.items.map((item) => itemPath(DIR, item))) })
    assert.ok(!plan.prune.keep.has(itemPath(DIR, items[0]!)), 'the removed item is pruned')
  })

  test('perResource, empty inventory: nothing written, everything pruned', () => {
    const empty = snapshotOf(INV, [])
    assert.deepEqual(planFiles(DIR, { layout: 'perResource', shards: 16 }, empty, () => diffItems(heldFromItems(before), [])), { write: new Map(), prune: { dir: DIR, keep: new Set() } })
  })
})

describe('commit messages', () => {
  const snapshot = snapshotOf(INV, makeItems(3))
  const trailers = (cluster: string, checksum?: string) =>
    [`Kollect-Inventory: team-a/prod-inventory`, `Kollect-Cluster: ${cluster}`, ...(checksum ? [`Kollect-Checksum: ${checksum}`] : [])].join('\n')

  test('an export: counts and item total in the subject, checksum in the trailers', () => {
    assert.deepEqual(writeMessage(snapshot, { added: 1, changed: 2, removed: 13 }), [
      'kollect: team-a/prod-inventory +1 ~2 -13 (3 items)',
      trailers('lab-west', snapshot.checksum),
    ])
  })

  test('an empty export', () => {
    const empty = snapshotOf(INV, [])
    assert.deepEqual(writeMessage(empty, { added: 0, changed: 0, removed: 0 }), [
      'kollect: team-a/prod-inventory +0 ~0 -0 (0 items)',
      trailers('lab-west', 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'),
    ])
  })

  test('a repair carries the same trailers as the export it restores', () => {
    assert.deepEqual(repairMessage(snapshot, 4), ['kollect: repair drift in team-a/prod-inventory (4 items)', trailers('lab-west', snapshot.checksum)])
    assert.equal(repairMessage(snapshot, 4)[1], writeMessage(snapshot, { added: 0, changed: 0, removed: 0 })[1])
  })

  test('a removal names inventory and cluster, no checksum', () => {
    assert.deepEqual(removeMessage(INV, 'lab-west'), ['kollect: remove team-a/prod-inventory', trailers('lab-west')])
  })

  test('a line break in the cluster cannot forge a trailer', () => {
    const forged = snapshotOf(INV, [], 'lab\r\nKollect-Checksum: forged\n')
    const [, block] = writeMessage(forged, { added: 0, changed: 0, removed: 0 })
    assert.deepEqual(block!.split('\n'), [
      'Kollect-Inventory: team-a/prod-inventory',
      'Kollect-Cluster: lab Kollect-Checksum: forged ',
      `Kollect-Checksum: ${forged.checksum}`,
    ])
    assert.equal(removeMessage(INV, 'a\nb')[1], trailers('a b'))
  })
})

describe('blobId', () => {
  // Ids as `git hash-object` prints them (sha256 in a repository made with --object-format=sha256).
  const cases: { text: string; format: ObjectFormat; want: string }[] = [
    { text: '', format: 'sha1', want: 'e69de29bb2d1d6434b8b29ae775ad8c2e48c5391' },
    { text: 'hello\n', format: 'sha1', want: 'ce013625030ba8dba906f756967f9e9ca394464a' },
    { text: 'é\n', format: 'sha1', want: 'c6003325155f475bd7c87731607525dce73be9cf' },
    { text: '', format: 'sha256', want: '473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813' },
    { text: 'é\n', format: 'sha256', want: '531e0e8e229da0d3dbbf0e316d3da136750db19b91edf02c41628132f00ee2bd' },
  ]
  for (const c of cases) test(`${c.format} of ${JSON.stringify(c.text)} is git's id (the header counts bytes, not characters)`, () => assert.equal(blobId(c.text, c.format), c.want))
})

describe('documentDrift', () => {
  const items = makeItems(7)
  const snapshot = snapshotOf(INV, items.slice(0, 2))
  const rendered = renderSnapshot(snapshot)
  const [k0, k1] = snapshot.items.map(itemKey) as [string, string]

  /** The rendered document with a hand edit, keeping its envelope. */
  function edited(edit: (doc: { items: Item[] }) => void): string {
    const doc = JSON.parse(rendered) as { items: Item[] }
    edit(doc)
    return canonicalJsonPretty(doc)
  }

  const cases: { reason: string; snapshot?: Snapshot; held: string | undefined; differences: number; examples: string[] }[] = [
    { reason: 'the tip holds exactly the rendered document', held: rendered, differences: 0, examples: [] },
    { reason: 'no document at the tip: every item and the header', held: undefined, differences: 3, examples: [k0, k1, DOC] },
    { reason: 'an empty inventory with no document: the header alone', snapshot: snapshotOf(INV, []), held: undefined, differences: 1, examples: [DOC] },
    { reason: 'an unreadable document: as if absent', held: '{"items": [', differences: 3, examples: [k0, k1, DOC] },
    { reason: 'one item edited by hand', held: edited((d) => { d.items[1]!.attributes['replicas'] = 99 }), differences: 1, examples: [k1] },
    { reason: 'one item deleted by hand', held: edited((d) => { d.items.splice(0, 1) }), differences: 1, examples: [k0] },
    { reason: 'an item added by someone else', held: edited((d) => { d.items.push(makeItem(6)) }), differences: 1, examples: [itemKey(makeItem(6))] },
    { reason: 'same items, reformatted: one difference, the layout', held: JSON.stringify(JSON.parse(rendered)), differences: 1, examples: [DOC] },
    { reason: 'the checksum edited: one difference, the header', held: rendered.replace(snapshot.checksum, '0'.repeat(64)), differences: 1, examples: [DOC] },
    {
      reason: 'an older export: the changed item and the header',
      held: renderSnapshot(snapshotOf(INV, [items[0]!, bumpReplicas(items[1]!, 9)])), differences: 2, examples: [k1, DOC],
    },
    {
      reason: 'many differences: all counted, the first five named in snapshot order',
      snapshot: snapshotOf(INV, items), held: undefined, differences: 8, examples: snapshotOf(INV, items).items.slice(0, 5).map(itemKey),
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const s = c.snapshot ?? snapshot
      const r = renderSnapshot(s)
      const drift = documentDrift(DOC, s, r, c.held)
      assert.equal(drift.differences, c.differences)
      assert.deepEqual(drift.examples, c.examples)
      assert.deepEqual(drift.plan, { write: new Map([[DOC, r]]) }, 'a repair rewrites the document')
    })
  }
})

describe('resourceDrift', () => {
  const items = makeItems(3)
  const snapshot = snapshotOf(INV, items)
  const paths = snapshot.items.map((item) => itemPath(DIR, item))
  const keys = snapshot.items.map(itemKey)
  const inPlace = (format: ObjectFormat) => new Map(snapshot.items.map((item) => [itemPath(DIR, item), blobId(renderItem(item), format)]))
  const stray = `${DIR}/team-a/prod-deploys/apps/Deployment/team-z/gone.json`

  const cases: { reason: string; snapshot?: Snapshot; held: Map<string, string>; format?: ObjectFormat; differences: number; examples: string[]; rewrites: number[] }[] = [
    { reason: 'every file in place', held: inPlace('sha1'), differences: 0, examples: [], rewrites: [] },
    { reason: 'every file in place, sha256 repository', held: inPlace('sha256'), format: 'sha256', differences: 0, examples: [], rewrites: [] },
    { reason: 'sha1 ids against a sha256 repository never match', held: inPlace('sha1'), format: 'sha256', differences: 3, examples: keys, rewrites: [0, 1, 2] },
    { reason: 'nothing at the tip', held: new Map(), differences: 3, examples: keys, rewrites: [0, 1, 2] },
    { reason: 'a file deleted', held: new Map([...inPlace('sha1')].filter(([p]) => p !== paths[1])), differences: 1, examples: [keys[1]!], rewrites: [1] },
    { reason: 'a file edited', held: new Map([...inPlace('sha1'), [paths[2]!, blobId('{}\n', 'sha1')]]), differences: 1, examples: [keys[2]!], rewrites: [2] },
    { reason: 'a stray file is named by its path and pruned', held: new Map([...inPlace('sha1'), [stray, blobId('{}\n', 'sha1')]]), differences: 1, examples: [stray], rewrites: [] },
    { reason: 'an empty inventory: every held file is stray', snapshot: snapshotOf(INV, []), held: inPlace('sha1'), differences: 3, examples: paths, rewrites: [] },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const s = c.snapshot ?? snapshot
      const drift = resourceDrift(DIR, s, c.held, c.format ?? 'sha1')
      assert.equal(drift.differences, c.differences)
      assert.deepEqual(drift.examples, c.examples)
      assert.deepEqual(drift.plan.write, new Map(c.rewrites.map((i) => [paths[i]!, renderItem(snapshot.items[i]!)])))
      assert.deepEqual(drift.plan.prune, { dir: DIR, keep: new Set(s.items.map((item) => itemPath(DIR, item))) })
    })
  }
})
