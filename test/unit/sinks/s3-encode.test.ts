import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { itemKey } from '../../../api/canonical.js'
import { diffItems } from '../../../sinks/diff.js'
import { heldFromItems, renderItem } from '../../../sinks/document.js'
import { s3Endpoints, s3Settings } from '../../../sinks/s3/config.js'
import {
  encodePointer,
  etagOf,
  expiredSnapshots,
  inventoryPrefix,
  itemObjectKey,
  parsePointer,
  planFromDiff,
  planFromListing,
  pointerFor,
  snapshotKey,
  timeStamp,
  type HeldObjects,
} from '../../../sinks/s3/encode.js'
import { bumpReplicas, makeItems, snapshotOf } from '../../support/items.js'

const INV = { namespace: 'team-a', name: 'prod' }
const TEMPLATE = 'inventory/{cluster}/{namespace}/{name}'
const PREFIX = 'inventory/lab-west/team-a/prod'

function heldOf(prefix: string, items: ReturnType<typeof makeItems>): HeldObjects {
  return { items: heldFromItems(items), keys: new Map(items.map((item) => [itemKey(item), itemObjectKey(prefix, item)])) }
}

describe('inventoryPrefix', () => {
  const cases: { reason: string; template?: string; name: string; want: string }[] = [
    { reason: 'the default template', name: 'prod', want: PREFIX },
    { reason: 'a name with "/" and ".." stays one segment', name: '../x/y', want: 'inventory/lab-west/team-a/..%2Fx%2Fy' },
    { reason: 'a name ".." cannot climb', name: '..', want: 'inventory/lab-west/team-a/%2E%2E' },
    { reason: 'spaces and unicode are percent-encoded', name: 'a b é', want: 'inventory/lab-west/team-a/a%20b%20%C3%A9' },
    { reason: 'a template without placeholders is taken as it is', template: 'fixed/root', name: 'x', want: 'fixed/root' },
    { reason: 'empty segments of the template collapse', template: 'a//{name}/', name: 'x', want: 'a/x' },
  ]
  for (const c of cases) {
    test(c.reason, () => assert.equal(inventoryPrefix(c.template ?? TEMPLATE, { cluster: 'lab-west', namespace: 'team-a', name: c.name }), c.want))
  }
  test('templates that climb, are absolute, name nothing or use unknown placeholders are refused', () => {
    for (const template of ['../{name}', '/abs/{name}', '.', '{bogus}/{name}']) {
      assert.throws(() => inventoryPrefix(template, { cluster: 'c', namespace: 'n', name: 'x' }), template)
    }
  })
})

describe('snapshot keys and the pointer', () => {
  test('keys sort by time: listing the prefix is the history, oldest first', () => {
    const early = snapshotKey(PREFIX, new Date('2026-01-02T03:04:05.006Z'), 'b'.repeat(64))
    const late = snapshotKey(PREFIX, new Date('2026-10-02T03:04:05.000Z'), 'a'.repeat(64))
    assert.equal(early, `${PREFIX}/snapshots/20260102T030405006Z-${'b'.repeat(64)}.json`)
    assert.deepEqual([late, early].sort(), [early, late])
    assert.equal(timeStamp(new Date(0)), '19700101T000000000Z')
  })

  test('the pointer round-trips, names the previous checksum, and is byte-identical for the same export', () => {
    const prev = snapshotOf(INV, makeItems(2))
    const snap = snapshotOf(INV, makeItems(3))
    const p0 = pointerFor(prev, 'document', undefined, 'k0')
    const p1 = pointerFor(snap, 'document', p0, 'k1')
    assert.equal(p1.previousChecksum, prev.checksum)
    assert.deepEqual(parsePointer(encodePointer(p1)), p1)
    assert.equal(encodePointer(p1), encodePointer(pointerFor(snap, 'document', p0, 'k1')))
    assert.equal(pointerFor(snap, 'perResource', undefined).snapshot, undefined)
  })

  test('text that is not a pointer parses to undefined (it is then replaced)', () => {
    for (const text of ['', 'null', '{}', '{"version":2,"checksum":"x","layout":"document"}', '{"version":1,"checksum":"x","layout":"other"}']) {
      assert.equal(parsePointer(text), undefined, text)
    }
  })

  test('etagOf is the quoted MD5 of the UTF-8 body', () => {
    assert.equal(etagOf('é'), `"${createHash('md5').update(Buffer.from('é', 'utf8')).digest('hex')}"`)
  })
})

describe('perResource plans', () => {
  const items = makeItems(5)
  const snap = snapshotOf(INV, items)

  test('from a diff: one changed item puts exactly one object and deletes none', () => {
    const next = snapshotOf(INV, items.map((item, i) => (i === 2 ? bumpReplicas(item, 9) : item)))
    const held = heldOf(PREFIX, items)
    const plan = planFromDiff(PREFIX, next, held, diffItems(held.items, next.items))
    assert.deepEqual([...plan.put.keys()], [itemObjectKey(PREFIX, items[2]!)])
    assert.deepEqual(plan.delete, [])
    assert.deepEqual(plan.result, { added: 0, changed: 1, removed: 0 })
  })

  test('from a diff: a removed item deletes exactly its object', () => {
    const next = snapshotOf(INV, items.slice(1))
    const held = heldOf(PREFIX, items)
    const plan = planFromDiff(PREFIX, next, held, diffItems(held.items, next.items))
    assert.deepEqual(plan.put.size, 0)
    assert.deepEqual(plan.delete, [itemObjectKey(PREFIX, items[0]!)])
  })

  test('from a diff: an object recreated with a new uid under the same name is put, never deleted', () => {
    const reborn = { ...items[1]!, uid: 'ffffffff-0000-4000-8000-000000000001' }
    const next = snapshotOf(INV, [items[0]!, reborn, ...items.slice(2)])
    const held = heldOf(PREFIX, items)
    const plan = planFromDiff(PREFIX, next, held, diffItems(held.items, next.items))
    assert.deepEqual([...plan.put.keys()], [itemObjectKey(PREFIX, reborn)])
    assert.deepEqual(plan.delete, [], 'the removed uid shares the new one\'s key')
    assert.deepEqual(plan.result, { added: 1, changed: 0, removed: 1 })
  })

  test('from a listing: matching ETags stay, others are put, strays are deleted', () => {
    const listed = new Map<string, string>([
      [itemObjectKey(PREFIX, items[0]!), etagOf(renderItem(items[0]!))],
      [itemObjectKey(PREFIX, items[1]!), '"stale"'],
      [`${PREFIX}/items/stray.json`, '"x"'],
    ])
    const plan = planFromListing(PREFIX, snap, listed)
    assert.deepEqual([...plan.put.keys()].sort(), items.slice(1).map((i) => itemObjectKey(PREFIX, i)).sort())
    assert.deepEqual(plan.delete, [`${PREFIX}/items/stray.json`])
    assert.deepEqual(plan.result, { added: 3, changed: 1, removed: 1 })
    assert.equal(plan.held.items.size, 5)
  })

  test('from a listing of exactly the snapshot: nothing to do', () => {
    const listed = new Map(items.map((item) => [itemObjectKey(PREFIX, item), etagOf(renderItem(item))]))
    const plan = planFromListing(PREFIX, snap, listed)
    assert.deepEqual({ put: plan.put.size, delete: plan.delete }, { put: 0, delete: [] })
  })
})

describe('retention', () => {
  const keys = ['s/1.json', 's/2.json', 's/3.json', 's/4.json']
  const cases: { reason: string; keep: number; current?: string; want: string[] }[] = [
    { reason: '0 keeps all', keep: 0, current: 's/4.json', want: [] },
    { reason: 'the oldest go first', keep: 2, current: 's/4.json', want: ['s/1.json', 's/2.json'] },
    { reason: 'the current document stays even when it is not the newest (another writer\'s clock)', keep: 1, current: 's/2.json', want: ['s/1.json', 's/3.json', 's/4.json'] },
    { reason: 'fewer documents than keep: none go', keep: 10, current: 's/4.json', want: [] },
  ]
  for (const c of cases) test(c.reason, () => assert.deepEqual(expiredSnapshots(keys, c.keep, c.current), c.want))
})

describe('s3Endpoints (what the SSRF guard checks)', () => {
  test('path-style: the endpoint; virtual-hosted: also the bucket\'s own host name', () => {
    assert.deepEqual(s3Endpoints({ type: 's3', s3: { bucket: 'inv', endpoint: 'http://minio:9000', pathStyle: true } }), ['http://minio:9000'])
    assert.deepEqual(s3Endpoints({ type: 's3', s3: { bucket: 'inv', endpoint: 'https://s3.example.com' } }), ['https://s3.example.com', 'https://inv.s3.example.com/'])
    assert.deepEqual(s3Endpoints({ type: 's3', s3: { bucket: 'inv', region: 'eu-west-1', pathStyle: true } }), ['https://s3.eu-west-1.amazonaws.com'])
  })
})

describe('s3Settings credentials', () => {
  const settings = (credentials: Record<string, string>) =>
    s3Settings({ id: 'team-a/objects', spec: { type: 's3', s3: { bucket: 'inv' } }, credentials, dataDir: '/x' }).credentials
  test('a Secret\'s camelCase keys, the AWS names and local environment keys (lower-cased) all work', () => {
    const want = { accessKeyId: 'AK', secretAccessKey: 'SK' }
    assert.deepEqual(settings({ accessKeyId: 'AK', secretAccessKey: 'SK' }), want)
    assert.deepEqual(settings({ AWS_ACCESS_KEY_ID: 'AK', AWS_SECRET_ACCESS_KEY: 'SK' }), want)
    assert.deepEqual(settings({ accesskeyid: 'AK', secretaccesskey: 'SK' }), want)
    assert.deepEqual(settings({ aws_access_key_id: 'AK', aws_secret_access_key: 'SK', aws_session_token: 'T' }), { ...want, sessionToken: 'T' })
  })
})
