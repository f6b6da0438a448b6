import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { hostname } from 'node:os'
import { PutObjectCommand } from '@aws-sdk/client-s3'
import type { ObjectRef, Snapshot } from '../../api/types.js'
import { renderItem, renderSnapshot } from '../../sinks/document.js'
import { itemObjectKey, parsePointer, type Pointer } from '../../sinks/s3/encode.js'
import { s3Settings } from '../../sinks/s3/config.js'
import { createS3Sink } from '../../sinks/s3/index.js'
import { markKey } from '../../sinks/s3/marks.js'
import { S3Service } from '../../sinks/s3/service.js'
import { SinkError, type Sink } from '../../sinks/sink.js'
import { bumpReplicas, makeItems, snapshotOf } from '../support/items.js'
import { hostilePeer, s3ErrorXml } from '../security/hostile-peer.js'
import { countingProxy, listKeys, readText, startS3, type CountingProxy, type S3Server } from '../support/s3.js'

const SINK_ID = 'platform/objects'

interface SinkSettings {
  layout?: 'document' | 'perResource'
  keepSnapshots?: number
  prefix?: string
  endpoint?: string
  credentials?: Record<string, string>
}

describe('s3 sink (real versitygw server)', () => {
  let s3: S3Server
  let proxy: CountingProxy
  const sinks: Sink[] = []
  let counter = 0

  before(async () => {
    s3 = await startS3()
    proxy = await countingProxy(s3)
  })

  after(async () => {
    for (const sink of sinks) await sink.close().catch(() => undefined)
    await proxy?.close()
    await s3?.destroy()
  })

  /** A sink through the counting proxy, on a prefix of its own so each test sees only its objects. */
  function sink(opts: SinkSettings = {}): Sink & { prefix: string } {
    counter += 1
    const prefix = opts.prefix ?? `t${counter}/{cluster}/{namespace}/{name}`
    const s = createS3Sink({
      id: SINK_ID,
      spec: {
        type: 's3',
        s3: { bucket: s3.bucket, endpoint: opts.endpoint ?? proxy.endpoint, pathStyle: true, prefix, layout: opts.layout, keepSnapshots: opts.keepSnapshots },
      },
      credentials: opts.credentials ?? s3.credentials,
      dataDir: '/nonexistent',
    })
    sinks.push(s)
    return Object.assign(s, { prefix: prefix.split('/')[0] as string })
  }

  const inv = (name: string): ObjectRef => ({ namespace: 'team-a', name })
  const base = (s: { prefix: string }, ref: ObjectRef): string => `${s.prefix}/lab-west/${ref.namespace}/${ref.name}`

  const listed = (prefix: string): Promise<string[]> => listKeys(s3, prefix)
  const text = (key: string): Promise<string> => readText(s3, key)

  async function pointer(prefix: string): Promise<Pointer> {
    const p = parsePointer(await text(`${prefix}/latest.json`))
    assert.ok(p, 'the pointer parses')
    return p
  }

  function itemKeys(prefix: string, snap: Snapshot): string[] {
    return snap.items.map((item) => itemObjectKey(prefix, item)).sort()
  }

  test('first export, document layout: one snapshot document keyed by time and checksum, and the pointer naming it', async () => {
    const s = sink()
    const ref = inv('web')
    const snap = snapshotOf(ref, makeItems(5))
    assert.deepEqual(await s.write(snap), { added: 5, changed: 0, removed: 0 })
    const prefix = base(s, ref)
    const keys = await listed(`${prefix}/`)
    assert.equal(keys.length, 2, keys.join(', '))
    const p = await pointer(prefix)
    assert.equal(p.checksum, snap.checksum)
    assert.equal(p.itemCount, 5)
    assert.equal(p.previousChecksum, null)
    assert.match(p.snapshot!, new RegExp(`^${prefix}/snapshots/\\d{8}T\\d{9}Z-${snap.checksum}\\.json$`))
    assert.equal(await text(p.snapshot!), renderSnapshot(snap), 'the document is the canonical snapshot, byte for byte')
  })

  test('document layout: a change adds one document to the history; the same snapshot again writes nothing, also from a new sink instance', async () => {
    const s = sink()
    const ref = inv('history')
    const items = makeItems(4)
    const first = snapshotOf(ref, items)
    await s.write(first)
    const second = snapshotOf(ref, [bumpReplicas(items[0]!, 9), ...items.slice(1, 3)])
    assert.deepEqual(await s.write(second), { added: 0, changed: 1, removed: 1 })
    const prefix = base(s, ref)
    const docs = await listed(`${prefix}/snapshots/`)
    assert.equal(docs.length, 2)
    assert.ok(docs[0]!.endsWith(`-${first.checksum}.json`) && docs[1]!.endsWith(`-${second.checksum}.json`), 'listing order is export order')
    assert.equal((await pointer(prefix)).previousChecksum, first.checksum)

    const mark = proxy.requests.length
    assert.deepEqual(await s.write(second), { added: 0, changed: 0, removed: 0 })
    const restarted = sink({ prefix: `${s.prefix}/{cluster}/{namespace}/{name}` })
    assert.deepEqual(await restarted.write(second), { added: 0, changed: 0, removed: 0 })
    assert.deepEqual(proxy.puts('', mark), [], 'an unchanged checksum writes nothing')
    assert.ok(proxy.requests.slice(mark).some((r) => r.status === 304), 'the warm check is a conditional GET answered 304')
  })

  test('perResource: first export writes one object per item; a 1-item change writes exactly that object; a remove deletes exactly one', async () => {
    const s = sink({ layout: 'perResource' })
    const ref = inv('resources')
    const prefix = base(s, ref)
    const items = makeItems(50)
    const first = snapshotOf(ref, items)
    assert.deepEqual(await s.write(first), { added: 50, changed: 0, removed: 0 })
    assert.deepEqual(await listed(`${prefix}/items/`), itemKeys(prefix, first))
    assert.equal(await text(itemObjectKey(prefix, items[7]!)), renderItem(items[7]!))
    assert.equal((await pointer(prefix)).layout, 'perResource')

    const changedItem = bumpReplicas(items[7]!, 42)
    const second = snapshotOf(ref, items.map((item, i) => (i === 7 ? changedItem : item)))
    let mark = proxy.requests.length
    assert.deepEqual(await s.write(second), { added: 0, changed: 1, removed: 0 })
    assert.deepEqual(proxy.puts(`${prefix}/items/`, mark), [itemObjectKey(prefix, changedItem)], 'exactly one object written')
    assert.deepEqual(proxy.puts(`${prefix}/latest.json`, mark), [`${prefix}/latest.json`])
    assert.equal(await text(itemObjectKey(prefix, changedItem)), renderItem(changedItem))

    const third = snapshotOf(ref, second.items.filter((item) => item.uid !== items[3]!.uid))
    mark = proxy.requests.length
    assert.deepEqual(await s.write(third), { added: 0, changed: 0, removed: 1 })
    assert.deepEqual(proxy.puts(`${prefix}/items/`, mark), [])
    assert.deepEqual(proxy.requests.slice(mark).filter((r) => r.method === 'DELETE' && r.key.startsWith(`${prefix}/items/`)).map((r) => r.key), [itemObjectKey(prefix, items[3]!)])
    assert.deepEqual(await listed(`${prefix}/items/`), itemKeys(prefix, third))
  })

  test('perResource: an object recreated under the same name (new uid) is rewritten, not deleted', async () => {
    const s = sink({ layout: 'perResource' })
    const ref = inv('recreated')
    const items = makeItems(3)
    await s.write(snapshotOf(ref, items))
    const reborn = { ...items[1]!, uid: 'ffffffff-0000-4000-8000-000000000001' }
    const next = snapshotOf(ref, [items[0]!, reborn, items[2]!])
    assert.deepEqual(await s.write(next), { added: 1, changed: 0, removed: 1 })
    const prefix = base(s, ref)
    assert.deepEqual(await listed(`${prefix}/items/`), itemKeys(prefix, next))
    assert.equal(await text(itemObjectKey(prefix, reborn)), renderItem(reborn))
  })

  test('a new sink instance (exporter restart) in perResource diffs against the bucket: one object written', async () => {
    const s = sink({ layout: 'perResource' })
    const ref = inv('restart')
    const items = makeItems(20)
    await s.write(snapshotOf(ref, items))
    const restarted = sink({ layout: 'perResource', prefix: `${s.prefix}/{cluster}/{namespace}/{name}` })
    const next = snapshotOf(ref, items.map((item, i) => (i === 4 ? bumpReplicas(item, 7) : item)))
    const mark = proxy.requests.length
    assert.deepEqual(await restarted.write(next), { added: 0, changed: 1, removed: 0 })
    const prefix = base(s, ref)
    assert.deepEqual(proxy.puts(`${prefix}/items/`, mark), [itemObjectKey(prefix, next.items.find((i) => i.uid === items[4]!.uid)!)])
  })

  test('second writer: a pointer moved between read and write is a 412; the loser starts over from the winner\'s state and leaves its own, whole', async () => {
    const a = sink({ layout: 'perResource' })
    const b = sink({ layout: 'perResource', prefix: `${a.prefix}/{cluster}/{namespace}/{name}` })
    const ref = inv('race')
    const prefix = base(a, ref)
    const items = makeItems(10)
    const s0 = snapshotOf(ref, items)
    await a.write(s0)
    await b.write(s0) // b now holds s0 as well
    const s1 = snapshotOf(ref, [...items, ...makeItems(3, 100)]) // a adds three
    const s2 = snapshotOf(ref, items.map((item, i) => (i === 0 ? bumpReplicas(item, 5) : item))) // b changes one

    // b's pointer write waits at the proxy until a has moved the pointer underneath it.
    const held = proxy.hold((r) => r.method === 'PUT' && r.key === `${prefix}/latest.json`)
    const mark = proxy.requests.length
    const bWrite = b.write(s2)
    const release = await held
    const aDirect = sink({ layout: 'perResource', prefix: `${a.prefix}/{cluster}/{namespace}/{name}`, endpoint: s3.endpoint })
    await aDirect.write(s1)
    assert.equal((await pointer(prefix)).checksum, s1.checksum)
    release()
    await bWrite

    const pointerPuts = proxy.requests.slice(mark).filter((r) => r.method === 'PUT' && r.key === `${prefix}/latest.json`)
    assert.deepEqual(pointerPuts.map((r) => r.status), [412, 200], 'the first pointer write was refused, the retry after re-reading succeeded')
    const p = await pointer(prefix)
    assert.equal(p.checksum, s2.checksum)
    assert.equal(p.previousChecksum, s1.checksum, 'b read what a wrote before replacing it')
    assert.deepEqual(await listed(`${prefix}/items/`), itemKeys(prefix, s2), 'a\'s three added objects are gone, b\'s change is there')
    assert.equal(await text(itemObjectKey(prefix, s2.items[0]!)), renderItem(s2.items.find((i) => i.uid === items[0]!.uid)!))
  })

  test('the pointer is created only if absent: a writer that saw none cannot replace one that appeared', async () => {
    const s = sink()
    const ref = inv('create-race')
    const prefix = base(s, ref)
    const held = proxy.hold((r) => r.method === 'PUT' && r.key === `${prefix}/latest.json`)
    const mark = proxy.requests.length
    const snap = snapshotOf(ref, makeItems(2))
    const writing = s.write(snap)
    const release = await held
    const other = snapshotOf(ref, makeItems(3))
    await sink({ prefix: `${s.prefix}/{cluster}/{namespace}/{name}`, endpoint: s3.endpoint }).write(other)
    release()
    await writing
    const statuses = proxy.requests.slice(mark).filter((r) => r.method === 'PUT' && r.key === `${prefix}/latest.json`).map((r) => r.status)
    assert.deepEqual(statuses, [412, 200])
    assert.equal((await pointer(prefix)).previousChecksum, other.checksum)
  })

  test('server stopped mid-export: a retriable error, nothing pointed at half-written; the retry writes only what is missing', async (t) => {
    const s = sink({ layout: 'perResource' })
    const ref = inv('outage')
    const prefix = base(s, ref)
    const n = 2000
    const snap = snapshotOf(ref, makeItems(n))
    const mark = proxy.requests.length
    const first = s.write(snap).then(() => 'resolved' as const, (e: unknown) => e)
    const deadline = Date.now() + 30_000
    while (proxy.puts(`${prefix}/items/`, mark).length < 200) {
      if (Date.now() > deadline) assert.fail('the export never started writing')
      await new Promise((r) => setTimeout(r, 5))
    }
    const stopping = Date.now()
    await s3.stop()
    t.diagnostic(`server stopped in ${Date.now() - stopping} ms`)
    const outcome = await first
    t.diagnostic(`write failed ${Date.now() - stopping} ms after the stop began`)
    assert.ok(outcome instanceof SinkError, String(outcome))
    assert.equal(outcome.retriable, true, outcome.message)
    t.diagnostic(`interrupted: ${outcome.message}`)
    await s3.start()
    assert.deepEqual(await listed(`${prefix}/latest.json`), [], 'no pointer to a partial export')
    const written = (await listed(`${prefix}/items/`)).length
    assert.ok(written > 0 && written < n, `${written} objects before the stop`)

    const retry = proxy.requests.length
    const result = await s.write(snap)
    assert.deepEqual(await listed(`${prefix}/items/`), itemKeys(prefix, snap))
    assert.equal((await pointer(prefix)).checksum, snap.checksum)
    assert.equal(proxy.puts(`${prefix}/items/`, retry).length, n - written, 'the retry wrote only the missing objects')
    assert.equal(result.added, n - written)
  })

  test('remove() (deletionPolicy Delete) deletes every object of the inventory and nothing else; exporting again starts afresh', async () => {
    const s = sink({ layout: 'perResource' })
    const gone = inv('gone')
    const kept = inv('gone-2') // its prefix starts with the removed one's name
    const snap = snapshotOf(gone, makeItems(5))
    await s.write(snap)
    await s.write(snapshotOf(kept, makeItems(2)))
    await s.remove(gone, 'lab-west')
    assert.deepEqual(await listed(`${base(s, gone)}/`), [])
    assert.equal((await listed(`${base(s, kept)}/`)).length, 3)
    await s.remove(gone, 'lab-west') // idempotent
    assert.deepEqual(await s.write(snap), { added: 5, changed: 0, removed: 0 })
    assert.equal((await pointer(base(s, gone))).previousChecksum, null)
  })

  test('retention: keepSnapshots keeps the newest documents, the current one among them', async () => {
    const s = sink({ keepSnapshots: 2 })
    const ref = inv('retained')
    const snaps = [1, 2, 3, 4].map((n) => snapshotOf(ref, makeItems(n)))
    for (const snap of snaps) {
      await s.write(snap)
      await new Promise((r) => setTimeout(r, 2)) // distinct millisecond keys
    }
    const docs = await listed(`${base(s, ref)}/snapshots/`)
    assert.equal(docs.length, 2)
    assert.ok(docs[0]!.endsWith(`-${snaps[2]!.checksum}.json`) && docs[1]!.endsWith(`-${snaps[3]!.checksum}.json`), docs.join(', '))
    assert.equal((await pointer(base(s, ref))).snapshot, docs[1])
  })

  test('names are escaped: an inventory name cannot add or climb a key level', async () => {
    const s = sink()
    const ref: ObjectRef = { namespace: 'team-a', name: '../x/y z' }
    await s.write(snapshotOf(ref, makeItems(1)))
    const keys = await listed(`${s.prefix}/`)
    assert.ok(keys.every((k) => k.startsWith(`${s.prefix}/lab-west/team-a/..%2Fx%2Fy%20z/`)), keys.join(', '))
  })

  test('wrong credentials: a permanent error that names the cause, without the credentials', async (t) => {
    const secretAccessKey = 'wrong-s3cr3t-value-0123456789'
    const accessKeyId = 'AKIAWRONGKEYID000000'
    for (const credentials of [{ accessKeyId, secretAccessKey }, { accessKeyId: s3.credentials.accessKeyId!, secretAccessKey }]) {
      const s = sink({ credentials })
      for (const action of [() => s.write(snapshotOf(inv('denied'), makeItems(1))), () => s.healthcheck()]) {
        const err = await action().then(() => assert.fail('expected a failure'), (e: unknown) => e)
        assert.ok(err instanceof SinkError, String(err))
        assert.equal(err.retriable, false, err.message)
        assert.match(err.message, /^s3 sink platform\/objects: (write|healthcheck) failed: /)
        assert.match(err.message, /: (GET|LIST) .*\(HTTP 4\d\d\).*check the keys in the sink secret/, err.message)
        for (const secret of [secretAccessKey, accessKeyId]) assert.ok(!err.message.includes(secret), err.message)
        assert.ok(!JSON.stringify(err).includes(secretAccessKey))
        t.diagnostic(err.message)
      }
    }
  })

  test('configuration errors are permanent and say what to fix', () => {
    const make = (s3Spec: Record<string, unknown>, credentials: Record<string, string> = { accessKeyId: 'a', secretAccessKey: 'b' }) => () =>
      createS3Sink({ id: SINK_ID, spec: { type: 's3', s3: { bucket: 'ok-bucket', ...s3Spec } }, credentials, dataDir: '/x' })
    const cases: [string, () => Sink, RegExp][] = [
      ['no keys in the secret', make({}, {}), /accessKeyId and secretAccessKey/],
      ['an invalid bucket', make({ bucket: 'No_Such' }), /not a valid bucket name/],
      ['credentials in the endpoint', make({ endpoint: 'https://user:pw@s3.example.com' }), /must not carry credentials/],
      ['an endpoint with a path', make({ endpoint: 'https://s3.example.com/bucket' }), /scheme:\/\/host/],
      ['a negative retention', make({ keepSnapshots: -1 }), /keepSnapshots/],
    ]
    for (const [reason, create, message] of cases) {
      assert.throws(create, (err: unknown) => err instanceof SinkError && !err.retriable && message.test(err.message), reason)
    }
  })

  test('an export that finds its own mark left by an interrupted attempt deletes it once', async () => {
    // Seen in CI after an outage: the retry deleted its own leftover mark twice at once (as its
    // mark and as a stale one), versitygw answered one of the two 404 NoSuchKey, and the export
    // failed for good.
    const s = sink({ layout: 'perResource' })
    const ref = inv('own-mark')
    const prefix = base(s, ref)
    const own = markKey(prefix, hostname())
    await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: own, Body: '{}' }))
    const from = proxy.requests.length
    await s.write(snapshotOf(ref, makeItems(3)))
    const deletes = proxy.requests.slice(from).filter((r) => r.method === 'DELETE' && r.key === own)
    assert.equal(deletes.length, 1, 'one DELETE of the mark')
    assert.deepEqual(await listed(`${prefix}/writing/`), [])
  })

  test('deleting an object that is already gone is done, as on AWS; other refusals still fail', async () => {
    // AWS answers 204 whatever the key; versitygw answers 404 NoSuchKey when a concurrent delete
    // removed the object between its check and its unlink. A small fake answers so every time.
    const peer = await hostilePeer((req, res) => {
      const [status, code] = req.url?.includes('denied') ? [403, 'AccessDenied'] : [404, 'NoSuchKey']
      res.writeHead(status, { 'content-type': 'application/xml' })
      res.end(s3ErrorXml(code, 'm'))
    })
    const service = new S3Service(s3Settings({
      id: SINK_ID, spec: { type: 's3', s3: { bucket: 'inventory', endpoint: peer.url, pathStyle: true } }, credentials: s3.credentials, dataDir: '/nonexistent',
    }))
    try {
      await service.deleteObjects(['gone/a.json', 'gone/b.json'])
      assert.deepEqual(peer.requests.map((r) => r.method), ['DELETE', 'DELETE'])
      await assert.rejects(service.deleteObjects(['denied/c.json']), /DELETE denied\/c\.json: AccessDenied/)
    } finally {
      service.close()
      await peer.close()
    }
  })

  test('the fixture server answers conditional writes as the sink relies on', async () => {
    const key = 'probe/conditional.json'
    await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: key, Body: 'a', IfNoneMatch: '*' }))
    const preconditionFailed = (e: { $metadata?: { httpStatusCode?: number } }) => e.$metadata?.httpStatusCode === 412
    await assert.rejects(s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: key, Body: 'b', IfNoneMatch: '*' })), preconditionFailed)
    await assert.rejects(s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: key, Body: 'b', IfMatch: '"0000"' })), preconditionFailed)
  })
})
