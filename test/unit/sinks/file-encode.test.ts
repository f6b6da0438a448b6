import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { Snapshot } from '../../../api/types.js'
import { renderSnapshot, type DocumentFormat } from '../../../sinks/document.js'
import { encodeFileWrite } from '../../../sinks/file/encode.js'
import type { WriteResult } from '../../../sinks/sink.js'
import { bumpReplicas, makeItems, snapshotOf } from '../../support/items.js'

const INV = { namespace: 'team-a', name: 'prod-inventory' }
const ITEMS = makeItems(4)
const BEFORE = snapshotOf(INV, ITEMS.slice(0, 3))
// Item 0 removed, item 1 changed, item 2 kept, item 3 added.
const AFTER = snapshotOf(INV, [bumpReplicas(ITEMS[1]!, 9), ITEMS[2]!, ITEMS[3]!])

function counts(added: number, changed: number, removed: number): WriteResult {
  return { added, changed, removed }
}

describe('encodeFileWrite', () => {
  const cases: { reason: string; existing: string | undefined; snapshot: Snapshot; format: DocumentFormat; write: boolean; want: WriteResult }[] = [
    { reason: 'no file: every item is added', existing: undefined, snapshot: BEFORE, format: 'json', write: true, want: counts(3, 0, 0) },
    { reason: 'no file and an empty inventory: the empty document is still written', existing: undefined, snapshot: snapshotOf(INV, []), format: 'json', write: true, want: counts(0, 0, 0) },
    { reason: 'the file already holds this document: nothing to write', existing: renderSnapshot(BEFORE), snapshot: BEFORE, format: 'json', write: false, want: counts(0, 0, 0) },
    { reason: 'the same for YAML', existing: renderSnapshot(BEFORE, 'yaml'), snapshot: BEFORE, format: 'yaml', write: false, want: counts(0, 0, 0) },
    { reason: 'an older document: counts what changed', existing: renderSnapshot(BEFORE), snapshot: AFTER, format: 'json', write: true, want: counts(1, 1, 1) },
    { reason: 'an older YAML document', existing: renderSnapshot(BEFORE, 'yaml'), snapshot: AFTER, format: 'yaml', write: true, want: counts(1, 1, 1) },
    { reason: 'an empty inventory over a full file removes every item', existing: renderSnapshot(BEFORE), snapshot: snapshotOf(INV, []), format: 'json', write: true, want: counts(0, 0, 3) },
    { reason: 'a corrupt file holds nothing: overwritten, every item added', existing: '{"items": [', snapshot: BEFORE, format: 'json', write: true, want: counts(3, 0, 0) },
    { reason: 'a YAML file under the json format holds nothing', existing: renderSnapshot(BEFORE, 'yaml'), snapshot: BEFORE, format: 'json', write: true, want: counts(3, 0, 0) },
    {
      reason: 'the same items reformatted by hand: rewritten, no item counted',
      existing: JSON.stringify(JSON.parse(renderSnapshot(BEFORE))), snapshot: BEFORE, format: 'json', write: true, want: counts(0, 0, 0),
    },
    {
      reason: 'the same items under another cluster: the envelope is rewritten, no item counted',
      existing: renderSnapshot(snapshotOf(INV, BEFORE.items, 'lab-east')), snapshot: BEFORE, format: 'json', write: true, want: counts(0, 0, 0),
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const got = encodeFileWrite(c.existing, c.snapshot, c.format)
      assert.equal(got.text, c.write ? renderSnapshot(c.snapshot, c.format) : undefined)
      assert.deepEqual(got.result, c.want)
    })
  }
})
