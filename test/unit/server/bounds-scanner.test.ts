import { after, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { setImmediate as turn } from 'node:timers/promises'
import { Arrival } from '../../../server/extraction/arrival.js'
import { BoundsScanner } from '../../../server/extraction/bounds-scanner.js'
import { jsonScanStart, managedFieldsCuts, Scan, scanJsonFrom, scanResult, type ScanMark } from '../../../server/protocol/json-depth.js'
import { deployment, goJson, targetSyncRequest } from '../../support/metacontroller.js'

// The bounds scan of an arriving body on a thread of its own (server/extraction/bounds-thread.ts),
// with a real worker thread: it must give what the main thread's scan gives, marks included.

const MiB = 1024 * 1024

/** A body of about size bytes: an object of members, each an object with a nested array, and a tail. */
function body(size: number, extra = ''): Buffer {
  const member = (i: number) => `"k${String(i).padStart(7, '0')}":{"a":[1,{"b":"x]}\\"${'y'.repeat(60)}"}],"c":${i}}`
  const parts: string[] = []
  let length = 0
  for (let i = 0; length < size; i++) {
    const m = member(i)
    parts.push(m)
    length += m.length + 1
  }
  return Buffer.from(`{"map":{${parts.join(',')}}${extra},"tail":true}`)
}

/** What the main thread's scan gives for the whole body, and the marks it notes. */
function onMain(bytes: Buffer, max: number, marks: ScanMark[]): { scan: Scan | undefined; marks: ScanMark[] } {
  const state = { ...jsonScanStart(), marks }
  const ok = scanJsonFrom(bytes, max, state, bytes.length)
  const scan = scanResult(state)
  return { scan: ok && scan !== Scan.TooDeep ? scan : undefined, marks }
}

/** The body sent to an arrival in chunks, a turn of the event loop apart, as a socket delivers it. */
async function arrive(arrival: Arrival, bytes: Buffer, chunk = 64 * 1024, fail = false): Promise<void> {
  for (let at = 0; at < bytes.length; at += chunk) {
    if (fail && at > bytes.length / 2) return arrival.fail()
    arrival.push(bytes.subarray(at, at + chunk))
    await turn()
  }
  arrival.end()
}

const marksFor = (bytes: Buffer): ScanMark[] => [{ depth: 2, after: bytes.length >> 1, at: -1 }, { depth: 1, after: 8, at: -1 }]

describe('BoundsScanner', () => {
  const scanner = new BoundsScanner()
  after(() => scanner.close())

  const cases = [
    { reason: 'a plain body', bytes: body(3 * MiB), max: 512 },
    { reason: 'a key that spells __proto__ makes it suspect', bytes: body(2 * MiB, ',"x":{"__proto__":1}'), max: 512 },
    { reason: 'an escape that could spell one makes it suspect', bytes: body(2 * MiB, ',"x":"\\u005f"'), max: 512 },
    { reason: 'nesting past the bound gives nothing', bytes: body(2 * MiB, `,"deep":${'['.repeat(40)}${']'.repeat(40)}`), max: 32 },
  ]
  for (const c of cases) {
    test(`${c.reason}: the thread gives what the main thread gives, marks included, at any chunk size`, async () => {
      const want = onMain(c.bytes, c.max, marksFor(c.bytes))
      assert.ok(want.marks.every((m) => m.at > 0), 'the marks are in the body')
      for (const chunk of [64 * 1024, 1000, 3 * MiB]) {
        const arrival = new Arrival(c.bytes.length)
        // A few bytes come before the scan starts, as the route's first reading takes them.
        arrival.push(c.bytes.subarray(0, 100))
        const marks = marksFor(c.bytes)
        const scanning = scanner.scan(arrival, c.max, marks)
        assert.ok(scanning, 'the thread takes the body')
        await arrive(arrival, c.bytes.subarray(100), chunk)
        assert.equal(await scanning, want.scan, `${chunk}-byte chunks`)
        // Marks serve only a scan that passed (the split of a body within the bound).
        if (want.scan !== undefined) assert.deepEqual(marks, want.marks, `${chunk}-byte chunks`)
        assert.ok(arrival.bytes.equals(c.bytes), 'the body is whole in the arrival')
      }
    })
  }

  test('the thread notes the objects\' managedFields as the main thread does', async () => {
    const bytes = Buffer.from(goJson(targetSyncRequest(Array.from({ length: 600 }, (_, i) => deployment(i)))))
    assert.ok(bytes.length > MiB)
    const from = bytes.indexOf('"Deployment.apps/v1":') + 21
    const want = managedFieldsCuts(from, 4)
    scanJsonFrom(bytes, 512, { ...jsonScanStart(), cuts: want }, bytes.length)
    assert.equal(want.ranges.length, 1200)
    const arrival = new Arrival(bytes.length)
    const cuts = managedFieldsCuts(from, 4)
    const scanning = scanner.scan(arrival, 512, undefined, cuts)
    assert.ok(scanning)
    await arrive(arrival, bytes, 10_000)
    assert.equal(await scanning, Scan.Plain)
    assert.deepEqual(cuts, want)
  })

  test('a body that fails while it comes gives nothing, and the thread takes the next one', async () => {
    const bytes = body(2 * MiB)
    const arrival = new Arrival(bytes.length)
    const scanning = scanner.scan(arrival, 512)
    assert.ok(scanning)
    await arrive(arrival, bytes, 64 * 1024, true)
    assert.equal(await scanning, undefined)
    const next = new Arrival(bytes.length)
    const again = scanner.scan(next, 512)
    assert.ok(again)
    await arrive(next, bytes)
    assert.equal(await again, Scan.Plain)
  })

  test('a thread that ends mid-scan gives nothing, and the next body gets a new thread', async () => {
    const bytes = body(2 * MiB)
    const arrival = new Arrival(bytes.length)
    arrival.push(bytes.subarray(0, 1000))
    const scanning = scanner.scan(arrival, 512)
    assert.ok(scanning)
    await scanner.close()
    assert.equal(await scanning, undefined)
    await arrive(arrival, bytes.subarray(1000))
    const next = new Arrival(bytes.length)
    const again = scanner.scan(next, 512)
    assert.ok(again, 'not busy, and a new thread')
    await arrive(next, bytes)
    assert.equal(await again, Scan.Plain)
  })

  test('one body at a time; a small body, one of undeclared length and one that has ended stay on the main thread (null)', async () => {
    const bytes = body(2 * MiB)
    const first = new Arrival(bytes.length)
    const scanning = scanner.scan(first, 512)
    assert.ok(scanning)
    assert.equal(scanner.scan(new Arrival(bytes.length), 512), null, 'busy')
    await arrive(first, bytes)
    assert.equal(await scanning, Scan.Plain)
    assert.equal(scanner.scan(new Arrival(1000), 512), null, 'small')
    assert.equal(scanner.scan(new Arrival(), 512), null, 'undeclared')
    const ended = new Arrival(bytes.length)
    ended.push(bytes)
    ended.end()
    assert.equal(scanner.scan(ended, 512), null, 'ended')
  })
})
