import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { PutObjectCommand } from '@aws-sdk/client-s3'
import type { Item, ObjectRef, Snapshot } from '../../api/types.js'
import { renderItem } from '../../sinks/document.js'
import { itemObjectKey, parsePointer } from '../../sinks/s3/encode.js'
import { createS3Sink } from '../../sinks/s3/index.js'
import { SinkError, type Sink } from '../../sinks/sink.js'
import { bumpReplicas, makeItems, snapshotOf } from '../support/items.js'
import { countingProxy, listKeys, readText, startS3, type CountingProxy, type S3Server } from '../support/s3.js'

// Issue 25, goal 1: an S3 sink never keeps a mix of two snapshots behind a pointer that names
// one of them. A crash is a write that stops after some objects (written here with the client, or
// a writer whose pointer write never arrives); two writers are two sink instances on one prefix.

const STALE_MINUTES = 5

describe('s3 sink: crashed and racing writers (real versitygw server)', () => {
  let s3: S3Server
  const sinks: Sink[] = []
  const proxies: CountingProxy[] = []
  let counter = 0

  before(async () => {
    s3 = await startS3()
  })

  after(async () => {
    for (const sink of sinks) await sink.close().catch(() => undefined)
    for (const proxy of proxies) await proxy.close().catch(() => undefined)
    await s3?.destroy()
  })

  const inv: ObjectRef = { namespace: 'team-a', name: 'web' }
  const fresh = (): string => `c${++counter}`
  const base = (root: string): string => `${root}/lab-west/${inv.namespace}/${inv.name}`

  async function proxy(): Promise<CountingProxy> {
    const p = await countingProxy(s3)
    proxies.push(p)
    return p
  }

  /** A sink writing under `root` as `writer`; its clock runs `skew()` ms ahead of the machine's. */
  function sink(root: string, layout: 'document' | 'perResource', writer: string, endpoint: string, skew: () => number = () => 0): Sink {
    const s = createS3Sink(
      {
        id: 'platform/objects',
        spec: { type: 's3', s3: { bucket: s3.bucket, endpoint, pathStyle: true, prefix: `${root}/{cluster}/{namespace}/{name}`, layout } },
        credentials: s3.credentials,
        dataDir: '/nonexistent',
      },
      () => new Date(Date.now() + skew()),
      writer,
    )
    sinks.push(s)
    return s
  }

  const listed = (prefix: string): Promise<string[]> => listKeys(s3, prefix)
  const text = (key: string): Promise<string> => readText(s3, key)

  /** How many item objects differ from what `snap` renders to, and whether the pointer names it. */
  async function mismatches(prefix: string, snap: Snapshot): Promise<number> {
    assert.deepEqual(await listed(`${prefix}/items/`), snap.items.map((i) => itemObjectKey(prefix, i)).sort())
    let differ = 0
    for (const item of snap.items) if ((await text(itemObjectKey(prefix, item))) !== renderItem(item)) differ++
    return differ
  }

  const changedAll = (items: readonly Item[], replicas: number): Item[] => items.map((item) => bumpReplicas(item, replicas))

  test('scenario 1: a cold start after an export killed mid-write compares the objects with the pointer and puts the snapshot back', async () => {
    const root = fresh()
    const prefix = base(root)
    const p = await proxy()
    const items = makeItems(300)
    const b = snapshotOf(inv, items)
    await sink(root, 'perResource', 'pod-1', p.endpoint).write(b)
    // The killed export (every item changed) wrote 100 objects; its pointer write never came.
    const killed = changedAll(items, 77)
    for (const item of killed.slice(0, 100)) await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: itemObjectKey(prefix, item), Body: renderItem(item) }))
    assert.equal(parsePointer(await text(`${prefix}/latest.json`))?.checksum, b.checksum, 'the pointer still names B')

    const restarted = sink(root, 'perResource', 'pod-1', p.endpoint)
    assert.deepEqual(await restarted.write(b), { added: 0, changed: 100, removed: 0 }, 'the restart writes back what the killed export changed')
    assert.equal(await mismatches(prefix, b), 0, 'every object holds B again')
    assert.deepEqual(await restarted.write(b), { added: 0, changed: 0, removed: 0 })
  })

  for (const layout of ['perResource', 'document'] as const) {
    test(`verify (${layout}): Report counts objects that differ from the confirmed snapshot without touching them; Repair puts them back`, async () => {
      const root = fresh()
      const prefix = base(root)
      const p = await proxy()
      const items = makeItems(40)
      const b = snapshotOf(inv, items)
      const s = sink(root, layout, 'pod-1', p.endpoint)
      await s.write(b)
      assert.ok(s.verify, 'the s3 sink has drift checks')
      assert.deepEqual(await s.verify(b, 'report'), { differences: 0, examples: [], repaired: false })

      const edited = bumpReplicas(items[3]!, 99)
      const target = layout === 'perResource' ? itemObjectKey(prefix, edited) : parsePointer(await text(`${prefix}/latest.json`))!.snapshot!
      const body = layout === 'perResource' ? renderItem(edited) : (await text(target)).replace(/"replicas": \d+/, '"replicas": 99')
      await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: target, Body: body }))

      const report = await s.verify(b, 'report')
      assert.equal(report.differences, 1)
      assert.equal(report.repaired, false)
      assert.equal(await text(target), body, 'Report leaves the store alone')

      const repair = await s.verify(b, 'repair')
      assert.equal(repair.differences, 1)
      assert.equal(repair.repaired, true)
      assert.deepEqual(await s.verify(b, 'report'), { differences: 0, examples: [], repaired: false })
      const pointer = parsePointer(await text(`${prefix}/latest.json`))!
      assert.equal(pointer.checksum, b.checksum)
      if (layout === 'perResource') assert.equal(await mismatches(prefix, b), 0)
    })
  }

  /**
   * Both at S0. A writes a change of every item, and dies before its pointer write (the pointer
   * PUT is held at A's proxy, then the proxy closes). B writes a 10-item change.
   */
  async function race(order: 'a-first' | 'b-first'): Promise<void> {
    const root = fresh()
    const prefix = base(root)
    const [pa, pb] = [await proxy(), await proxy()]
    let skew = 0
    const a = sink(root, 'perResource', 'pod-a', pa.endpoint)
    const b = sink(root, 'perResource', 'pod-b', pb.endpoint, () => skew)
    const items = makeItems(200)
    const s0 = snapshotOf(inv, items)
    await a.write(s0)
    await b.write(s0)
    const sa = snapshotOf(inv, changedAll(items, 55))
    const sb = snapshotOf(inv, items.map((item, i) => (i < 10 ? bumpReplicas(item, 66) : item)))
    const busy = (err: unknown): boolean => err instanceof SinkError && err.retriable && /another writer/.test(err.message)

    const aPointer = pa.hold((r) => r.method === 'PUT' && r.key.endsWith('/latest.json'))
    if (order === 'a-first') {
      const aDone = a.write(sa).catch((err: unknown) => err)
      await aPointer
      // B wrote nothing while A's objects were going out: no pointer of B names A's objects.
      await assert.rejects(b.write(sb), busy)
      await pa.close()
      assert.ok((await aDone) instanceof Error, 'A died before its pointer write')
    } else {
      // B has read the pointer and found no writer's mark; its own mark waits while A starts, so
      // both write at once, and B's pointer lands first.
      const bMark = pb.hold((r) => r.method === 'PUT' && r.key.includes('/writing/'))
      const bDone = b.write(sb).then(() => 'synced', (err: unknown) => err)
      const releaseB = await bMark
      const aDone = a.write(sa).catch((err: unknown) => err)
      await aPointer
      releaseB()
      assert.ok(busy(await bDone), 'B won the pointer but A wrote behind it: B does not call itself done')
      assert.equal(parsePointer(await text(`${prefix}/latest.json`))?.checksum, sb.checksum, 'the pointer names B')
      await pa.close()
      assert.ok((await aDone) instanceof Error, 'A died before its pointer write')
    }
    assert.ok((await mismatches(prefix, sb)) > 0, 'A\'s objects are in the bucket')
    // While A's mark is fresh, every write of B fails (retriable): B is not Synced.
    await assert.rejects(b.write(sb), busy)
    const report = await b.verify!(sb, 'report')
    assert.ok(report.differences >= 190, `verify finds A's objects (${report.differences})`)

    // Once A's mark is stale, B's next write compares every object and leaves only its own.
    skew = (STALE_MINUTES + 1) * 60_000
    await b.write(sb)
    assert.equal(await mismatches(prefix, sb), 0, 'only B\'s objects')
    assert.equal(parsePointer(await text(`${prefix}/latest.json`))?.checksum, sb.checksum)
    assert.deepEqual(await listed(`${prefix}/writing/`), [], 'the dead writer\'s mark is gone')
    assert.deepEqual(await b.verify!(sb, 'report'), { differences: 0, examples: [], repaired: false })
    assert.deepEqual(await b.write(sb), { added: 0, changed: 0, removed: 0 })
  }

  test('scenario 2: B writes while A is writing, A dies; B never says done over A\'s objects and then leaves only its own', () => race('a-first'))
  test('scenario 2: B wins the pointer while A writes behind it, A dies; B is not done until every object is B\'s', () => race('b-first'))
})
