import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import path from 'node:path'
import { canonicalJsonPretty, itemHash, itemKey } from '../../../api/canonical.js'
import type { Item, Snapshot } from '../../../api/types.js'
import {
  heldFromItems, parseItem, parseSnapshotDocument, parseSnapshotItems, renderDocumentPath, renderItem, renderSnapshot, type DocumentFormat,
} from '../../../sinks/document.js'
import { SinkError } from '../../../sinks/sink.js'
import { makeItem, makeItems, snapshotOf } from '../../support/items.js'

const INV = { namespace: 'team-a', name: 'prod-inventory' }
const FORMATS: DocumentFormat[] = ['json', 'yaml']

/** Strings a YAML or JSON writer must quote or escape to read them back as the same string. */
const AWKWARD = [
  'yes', 'no', 'null', '~', '0123', '1e3', '0x1F', 'true', '', ' lead', 'trail ', '- a', 'a: b', '#c', '@at', '`bt', '!tag', '&anc', '*ref',
  '{x}', '[y]', "'q'", '"dq"', 'multi\nline', 'cr\r\nlf', 'tab\t', 'ls\u2028ps\u2029', 'é😀', '\u0000nul', 'x'.repeat(300),
]

function awkwardItem(): Item {
  return makeItem(7, {
    name: 'odd name/with "quotes" ü',
    attributes: { ...Object.fromEntries(AWKWARD.map((s, i) => [`k${i}`, s])), ...(JSON.parse('{"__proto__":{"polluted":true}}') as object), n: [0, -1, 1.5, 1e21], nested: { z: null, a: false } },
  })
}

const SNAPSHOTS: { reason: string; snapshot: Snapshot }[] = [
  { reason: 'an empty inventory', snapshot: snapshotOf(INV, []) },
  { reason: 'one item', snapshot: snapshotOf(INV, [makeItem(1)]) },
  { reason: 'several items', snapshot: snapshotOf(INV, makeItems(5)) },
  { reason: 'awkward strings, unicode and a "__proto__" key', snapshot: snapshotOf(INV, [awkwardItem(), makeItem(2)]) },
]

describe('renderSnapshot', () => {
  for (const { reason, snapshot } of SNAPSHOTS) {
    test(`json is byte-identical to canonicalJsonPretty: ${reason}`, () => {
      assert.equal(renderSnapshot(snapshot), canonicalJsonPretty(snapshot))
    })

    for (const format of FORMATS) {
      test(`${format} reads back as the same items and envelope: ${reason}`, () => {
        const doc = parseSnapshotDocument(renderSnapshot(snapshot, format), format)
        assert.ok(doc)
        assert.deepEqual(doc.items, snapshot.items)
        assert.equal(doc.items.map(itemHash).join(), snapshot.items.map(itemHash).join(), 'every item hashes as before')
        assert.deepEqual({ ...doc.envelope }, { ...snapshot, items: undefined })
      })
    }
  }

  test('an unchanged item renders the same text in a later snapshot (the cache is keyed by the item)', () => {
    const items = makeItems(3)
    const before = renderSnapshot(snapshotOf(INV, items))
    const after = renderSnapshot(snapshotOf(INV, [items[0]!, makeItem(1, { attributes: { replicas: 9 } }), items[2]!]))
    assert.notEqual(after, before)
    assert.equal(after, canonicalJsonPretty(snapshotOf(INV, [items[0]!, makeItem(1, { attributes: { replicas: 9 } }), items[2]!])))
  })

  test('json puts the items between the envelope keys in sorted order, two-space indented', () => {
    const text = renderSnapshot(snapshotOf(INV, []))
    assert.equal(text, [
      '{',
      '  "checksum": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",',
      '  "cluster": "lab-west",',
      '  "inventory": {',
      '    "name": "prod-inventory",',
      '    "namespace": "team-a"',
      '  },',
      '  "itemCount": 0,',
      '  "items": [],',
      '  "schemaVersion": "kollect.dev/v1alpha1"',
      '}',
      '',
    ].join('\n'))
  })

  test('yaml neither folds a long string nor aliases a repeated value', () => {
    const shared = { image: 'registry.example.com/' + 'x'.repeat(200), ports: [80, 443] }
    const text = renderSnapshot(snapshotOf(INV, [makeItem(1, { attributes: { shared } }), makeItem(2, { attributes: { shared } })]), 'yaml')
    assert.equal(text.split('\n').filter((line) => line.includes('x'.repeat(200))).length, 2, 'the long string stays on one line, twice')
    assert.doesNotMatch(text, /[&*]a\d/, 'no anchors or aliases')
    assert.match(text, /^checksum: [0-9a-f]{64}$/m)
  })
})

describe('renderItem and parseItem', () => {
  test('an item round-trips', () => {
    const item = awkwardItem()
    assert.equal(renderItem(item), canonicalJsonPretty(item))
    assert.deepEqual(parseItem(renderItem(item)), item)
  })

  const notItems: { reason: string; text: string }[] = [
    { reason: 'not JSON', text: '{"group":' },
    { reason: 'an array', text: '[]' },
    { reason: 'a field of the wrong type', text: JSON.stringify({ ...makeItem(1), uid: 7 }) },
    { reason: 'no target', text: JSON.stringify({ ...makeItem(1), target: undefined }) },
    { reason: 'attributes as an array', text: JSON.stringify({ ...makeItem(1), attributes: [] }) },
  ]
  for (const c of notItems) test(`parseItem: ${c.reason} is not an item`, () => assert.equal(parseItem(c.text), undefined))
})

describe('parseSnapshotDocument', () => {
  const good = renderSnapshot(snapshotOf(INV, makeItems(2)))
  const notDocuments: { reason: string; text: string; format?: DocumentFormat }[] = [
    { reason: 'the empty text', text: '' },
    { reason: 'truncated JSON', text: good.slice(0, good.length / 2) },
    { reason: 'a JSON array', text: '[]' },
    { reason: 'no items', text: '{"checksum":"x"}' },
    { reason: 'items that is not an array', text: '{"items":{}}' },
    { reason: 'one item that is not an item', text: JSON.stringify({ items: [makeItem(1), { name: 'x' }] }) },
    { reason: 'YAML read as JSON', text: renderSnapshot(snapshotOf(INV, makeItems(1)), 'yaml') },
    { reason: 'a YAML scalar', text: 'just text', format: 'yaml' },
    { reason: 'broken YAML', text: 'items: [\n  - a: "', format: 'yaml' },
  ]
  for (const c of notDocuments) {
    test(`${c.reason} is no document`, () => {
      assert.equal(parseSnapshotDocument(c.text, c.format), undefined)
      assert.equal(parseSnapshotItems(c.text, c.format), undefined)
    })
  }

  test('JSON read as YAML is a document (JSON is YAML)', () => {
    assert.deepEqual(parseSnapshotItems(good, 'yaml'), snapshotOf(INV, makeItems(2)).items)
  })
})

describe('heldFromItems', () => {
  test('maps each item key to its hash, and nothing to nothing', () => {
    const items = makeItems(3)
    assert.deepEqual(heldFromItems(items), new Map(items.map((item) => [itemKey(item), { hash: itemHash(item) }])))
    assert.equal(heldFromItems([]).size, 0)
  })
})

describe('renderDocumentPath', () => {
  const root = path.resolve('/srv/kollect')
  const sink = { kind: 'file', id: 'team-a/files' }
  const values = { cluster: 'lab', namespace: 'team-a', name: 'inv' }

  test('names a file below root', () => {
    assert.equal(renderDocumentPath(sink, root, '{cluster}/{namespace}/{name}.json', values), path.join(root, 'lab', 'team-a', 'inv.json'))
  })

  const refused: { reason: string; template: string; error: RegExp }[] = [
    { reason: 'the empty template names root', template: '', error: /path template "" must name a file/ },
    { reason: '"." names root', template: '.', error: /must name a file/ },
    { reason: 'a trailing slash names a directory', template: '{cluster}/', error: /must name a file/ },
    { reason: 'an unknown placeholder', template: '{tenant}.json', error: /unknown placeholder/ },
    { reason: 'a climb out of root', template: '../{name}.json', error: /must not contain "\.\."/ },
  ]
  for (const c of refused) {
    test(`${c.reason}: a permanent configuration error`, () => {
      assert.throws(() => renderDocumentPath(sink, root, c.template, values), (err: unknown) => {
        assert.ok(err instanceof SinkError)
        assert.equal(err.retriable, false)
        assert.match(err.message, /^file sink team-a\/files: invalid configuration: /)
        assert.match(err.message, c.error)
        return true
      })
    })
  }
})
