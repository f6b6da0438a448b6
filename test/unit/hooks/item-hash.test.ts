import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { canonicalJson, itemHash, itemHashOfJson, itemJsonWithAttributes, itemsChecksum, sha256 } from '../../../api/canonical.js'
import type { Item } from '../../../api/types.js'

// The hooks hash an item from its attributes' canonical JSON (written for the size bound) and
// its identity's: it must be the hash of the whole item's canonical JSON, whatever the values.
const identity = { group: 'apps', kind: 'Deployment', name: 'web', namespace: 'team-a', target: { name: 't', namespace: 'team-a' }, uid: 'u-1', version: 'v1' }
const attributeSets: Item['attributes'][] = [
  {},
  { images: ['a', 'b'], replicas: 3, ready: true, team: null },
  { zeta: 1, alpha: { y: 2, x: [{ b: 1, a: 2 }] } },
  { name: 'ü🙂\u2028"\\', nested: { '': 'empty key', 'ä': 1, a: 1 } },
  JSON.parse('{"__proto__": {"b": 1, "a": 2}, "constructor": "c"}') as Item['attributes'],
]
const identities = [
  identity,
  { ...identity, name: 'ü🙂', namespace: '', group: '' },
  { ...identity, uid: 7 as unknown as string, target: { name: 'n"q', namespace: 'x' } },
  { ...identity, target: { namespace: 'x', name: 'n', extra: { b: 1, a: 2 } } },
  { ...identity, extra: 'not an Item field' },
]

describe('itemJsonWithAttributes', () => {
  test('is the whole item\'s canonical JSON for every attribute set and identity, and its hash the item\'s', () => {
    for (const id of identities) {
      for (const attributes of attributeSets) {
        const item = { attributes, ...id } as Item
        const json = itemJsonWithAttributes(item, canonicalJson(attributes))
        assert.equal(json, canonicalJson({ ...item }), JSON.stringify(item))
        const want = sha256(canonicalJson({ ...item }))
        assert.equal(itemHashOfJson(item, json), want, JSON.stringify(item))
        // Seeded: itemHash answers from it without serialising again.
        assert.equal(itemHash(item), want)
      }
    }
  })

  test('itemsChecksum is the SHA-256 of the item hashes, one per line', () => {
    const items = attributeSets.map((attributes, i) => ({ attributes, ...identity, uid: `u-${i}` }) as Item)
    const hash = createHash('sha256')
    items.forEach((item, i) => hash.update((i ? '\n' : '') + sha256(canonicalJson({ ...item }))))
    assert.equal(itemsChecksum(items), hash.digest('hex'))
    assert.equal(itemsChecksum([]), createHash('sha256').digest('hex'))
  })
})
