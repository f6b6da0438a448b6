import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { encodeFrame, FrameDecoder } from '../../../server/extraction/frames.js'
import { sniffNamespace } from '../../../server/extraction/namespace-sniff.js'
import { deployment, goJson, targetSyncRequest } from '../../support/metacontroller.js'
import { targetWith } from '../../security/support.js'

// The fair queue reads a sync's namespace from the raw bytes before any child parses them.

/** A target sync as Metacontroller sends it, for a target in `namespace`. */
function metacontrollerBody(namespace: string): string {
  return goJson(targetSyncRequest([deployment(1, { namespace })], { target: targetWith({}, 'prod-deploys', namespace) }))
}

describe('sniffNamespace', () => {
  const big = 'x'.repeat(300 * 1024)
  const cases: { reason: string; body: string; want: string | null }[] = [
    { reason: 'a Metacontroller request: controller first, parent keys sorted', body: metacontrollerBody('team-b'), want: 'team-b' },
    {
      reason: 'the controller names a namespace (its webhook service) before the parent: only parent.metadata counts',
      body: '{"controller":{"metadata":{"name":"c","namespace":"kollect"},"spec":{"hooks":{"sync":{"webhook":{"service":{"namespace":"kollect"}}}}}},' +
        '"parent":{"apiVersion":"v1","metadata":{"name":"t","namespace":"team-c"}}}',
      want: 'team-c',
    },
    { reason: 'namespace keys elsewhere in the parent do not count', body: '{"parent":{"spec":{"namespace":"evil"},"metadata":{"labels":{"namespace":"evil"},"namespace":"team-d"}}}', want: 'team-d' },
    { reason: 'pretty-printed JSON (curl users)', body: JSON.stringify({ parent: { metadata: { name: 't', namespace: 'team-e' } } }, null, 2), want: 'team-e' },
    { reason: 'strings holding braces, quotes and colons are skipped as strings',
      body: '{"controller":{"x":"}{\\":\\"parent\\":{"},"parent":{"metadata":{"a":"\\"}","namespace":"team-f"}}}', want: 'team-f' },
    { reason: 'a parent without a namespace (cluster-scoped)', body: '{"parent":{"metadata":{"name":"t"}},"related":{"x":{"metadata":{"namespace":"team-g"}}}}', want: null },
    { reason: 'a namespace that is not a DNS label', body: '{"parent":{"metadata":{"namespace":"Team_A"}}}', want: null },
    { reason: 'an escaped namespace is not decoded', body: '{"parent":{"metadata":{"namespace":"team\\u002da"}}}', want: null },
    { reason: 'a namespace that is not a string', body: '{"parent":{"metadata":{"namespace":["team-a"]}}}', want: null },
    { reason: 'a body cut before the namespace', body: metacontrollerBody('team-h').slice(0, 200), want: null },
    { reason: 'a namespace past the scan limit', body: `{"controller":{"pad":"${big}"},"parent":{"metadata":{"namespace":"team-i"}}}`, want: null },
    { reason: 'not JSON at all', body: 'namespace: team-a', want: null },
    { reason: 'a closing brace first', body: '}', want: null },
    { reason: 'more closing than opening brackets', body: '{"parent":{}}]]}', want: null },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      assert.equal(sniffNamespace(Buffer.from(c.body)), c.want)
    })
  }

  test('never throws, and finds only DNS labels, on arbitrary bytes and JSON', () => {
    const bodies = fc.oneof(fc.string({ unit: 'binary' }), fc.jsonValue().map((v) => JSON.stringify(v) ?? ''), fc.string({ unit: fc.constantFrom('{', '}', '[', ']', '"', ':', ',', '\\', 'a') }))
    fc.assert(fc.property(bodies, (body) => {
      const got = sniffNamespace(Buffer.from(body))
      assert.ok(got === null || /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(got), String(got))
    }), { numRuns: 2000 })
  })
})

describe('frames', () => {
  test('frames survive any split of the byte stream, payloads intact', () => {
    const payload = Buffer.from(metacontrollerBody('team-a'))
    const frames = [encodeFrame({ type: 'job', id: 1 }, payload), encodeFrame({ type: 'plural', id: 1 }), encodeFrame({ type: 'job', id: 2 }, Buffer.from('{}'))]
    const stream = Buffer.concat(frames.flat())
    for (const size of [1, 3, 7, 8, 9, 64, 4096, stream.length]) {
      const decoder = new FrameDecoder<{ type: string; id: number }>()
      const got: { header: unknown; payload: string }[] = []
      for (let i = 0; i < stream.length; i += size) {
        for (const f of decoder.push(stream.subarray(i, i + size))) got.push({ header: f.header, payload: f.payload.toString() })
      }
      assert.deepStrictEqual(got, [
        { header: { type: 'job', id: 1 }, payload: payload.toString() },
        { header: { type: 'plural', id: 1 }, payload: '' },
        { header: { type: 'job', id: 2 }, payload: '{}' },
      ], `chunks of ${size} bytes`)
    }
  })

  test('reads into readTarget() give the same frames, the payload filled in place and the scratch buffer free to reuse', () => {
    const payload = Buffer.from(metacontrollerBody('team-a'))
    const stream = Buffer.concat([encodeFrame({ type: 'job', id: 1 }, payload), encodeFrame({ type: 'plural', id: 1 }), encodeFrame({ type: 'job', id: 2 }, Buffer.from('{}'))].flat())
    for (const size of [1, 5, 8, 13, 100, 4096, stream.length]) {
      const decoder = new FrameDecoder<{ type: string; id: number }>()
      const scratch = Buffer.alloc(64)
      const got: { header: unknown; payload: string }[] = []
      const inPlace = new Set<ArrayBufferLike>()
      for (let i = 0; i < stream.length;) {
        // As a socket read does: at most the target's length, at most what has arrived.
        const target = decoder.readTarget(scratch)
        const n = stream.copy(target, 0, i, Math.min(i + size, stream.length))
        i += n
        if (target !== scratch) inPlace.add(target.buffer)
        for (const f of decoder.pushRead(n)) got.push({ header: f.header, payload: f.payload.toString() })
        scratch.fill(0x7b)
      }
      assert.deepStrictEqual(got, [
        { header: { type: 'job', id: 1 }, payload: payload.toString() },
        { header: { type: 'plural', id: 1 }, payload: '' },
        { header: { type: 'job', id: 2 }, payload: '{}' },
      ], `reads of ${size} bytes`)
      // The body (larger than the scratch buffer) was read where it ends up.
      assert.ok(inPlace.size > 0, `reads of ${size} bytes`)
    }
  })
})
