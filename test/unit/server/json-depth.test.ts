import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import sjson from 'secure-json-parse'
import type { KubeObject } from '../../../api/types.js'
import {
  jsonScanStart, managedFieldsCuts, readJson, Scan, SCAN_LOOKAHEAD, scanJson, scanJsonFrom, scanResult, type ManagedFieldsCuts,
} from '../../../server/protocol/json-depth.js'
import { deployment, goJson, loadExampleCr, targetSyncRequest } from '../../support/metacontroller.js'

const loadExample = () => loadExampleCr('profile-deployments.yaml')

// The child parses plain JSON.parse when one pass saw no text that could spell __proto__ or
// constructor: these keep that pass honest against secure-json-parse itself.

const secure = (text: string): { ok: true; value: unknown } | { ok: false } => {
  try {
    return { ok: true, value: sjson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' }) }
  } catch {
    return { ok: false }
  }
}

describe('scanJson', () => {
  const cases: { reason: string; text: string; max?: number; want: Scan }[] = [
    { reason: 'a Metacontroller body (Go escapes <, > and & as \\u003c...) is plain',
      text: goJson(targetSyncRequest([deployment(1, { managedFields: true })])) + '"\\u003c\\u0026"', want: Scan.Plain },
    { reason: 'a __proto__ key', text: '{"a":{"__proto__":{}}}', want: Scan.Suspect },
    { reason: 'a constructor key', text: '{"constructor":{"prototype":{}}}', want: Scan.Suspect },
    { reason: 'an underscore spelled \\u005f', text: '{"\\u005f_proto__":1}', want: Scan.Suspect },
    { reason: 'an upper-case escape of a letter', text: '{"c\\u006Fnstructor":1}', want: Scan.Suspect },
    { reason: 'a letter escaped as \\u0070', text: '{"__\\u0070roto__":1}', want: Scan.Suspect },
    { reason: 'the words inside a value, past its first character, do not count', text: '{"a":"x__proto__ constructor"}', want: Scan.Plain },
    { reason: 'an escaped quote does not end the string', text: '{"a":"\\"__proto__"}', want: Scan.Plain },
    { reason: 'an escaped backslash before u0070 is text, not an escape', text: '{"a":"\\\\u0070"}', want: Scan.Plain },
    { reason: 'brackets inside strings do not nest', text: '{"a":"[[[[{{{{"}', max: 1, want: Scan.Plain },
    { reason: 'nesting at the bound', text: '[[[]]]', max: 3, want: Scan.Plain },
    { reason: 'one level over the bound', text: '[[[[]]]]', max: 3, want: Scan.TooDeep },
    { reason: 'too deep wins over suspect', text: '[{"__proto__":[[]]}]', max: 3, want: Scan.TooDeep },
  ]
  for (const c of cases) test(c.reason, () => assert.equal(scanJson(Buffer.from(c.text), c.max ?? 512), c.want))

  /** scanJsonFrom over bytes as they come, cut at cuts: only the bytes that have come are there to read. */
  const inPieces = (bytes: Buffer, max: number, cuts: number[]): Scan => {
    const state = jsonScanStart()
    for (const cut of cuts) {
      if (!scanJsonFrom(bytes.subarray(0, cut), max, state, cut - SCAN_LOOKAHEAD)) return Scan.TooDeep
    }
    scanJsonFrom(bytes, max, state, bytes.length)
    return scanResult(state)
  }

  test('scanned as it arrives, cut anywhere, it gives what the whole body gives', () => {
    for (const c of cases) {
      const bytes = Buffer.from(c.text)
      const max = c.max ?? 512
      // Every cut of the short ones, one at a time and all together.
      if (bytes.length < 2000) {
        const every = Array.from({ length: bytes.length }, (_, i) => i + 1)
        assert.equal(inPieces(bytes, max, every), c.want, `${c.reason}, a byte at a time`)
        for (const cut of every) assert.equal(inPieces(bytes, max, [cut]), c.want, `${c.reason}, cut at ${cut}`)
      }
      for (const size of [7, 64, 1000, 65_536]) {
        const cuts = Array.from({ length: Math.ceil(bytes.length / size) }, (_, i) => Math.min(bytes.length, (i + 1) * size))
        assert.equal(inPieces(bytes, max, cuts), c.want, `${c.reason}, ${size} bytes at a time`)
      }
    }
  })

  test('scanned as it arrives, any JSON cut anywhere gives what the whole gives', () => {
    const text = fc.jsonValue({ maxDepth: 6 }).map((v) => JSON.stringify(v))
    fc.assert(fc.property(text, fc.array(fc.nat(), { maxLength: 8 }), fc.integer({ min: 1, max: 6 }), (t, at, max) => {
      const bytes = Buffer.from(t.replaceAll('a', '\\"_\\u0063').replaceAll('b', '__proto__'))
      const cuts = [...new Set(at.map((n) => 1 + (n % bytes.length)))].sort((x, y) => x - y)
      assert.equal(inPieces(bytes, max, cuts), scanJson(bytes, max))
    }), { numRuns: 2000 })
  })
})

describe('managedFieldsCuts', () => {
  const KEY = '"Deployment.apps/v1":'

  /** The cuts a scan of bytes notes in the target kind's map, cut into pieces where told. */
  const cutsOf = (bytes: Buffer, pieces: number[] = []): ManagedFieldsCuts => {
    const cuts = managedFieldsCuts(bytes.indexOf(KEY) + KEY.length, 4)
    const state = { ...jsonScanStart(), cuts }
    for (const at of pieces) scanJsonFrom(bytes.subarray(0, at), 512, state, at - SCAN_LOOKAHEAD)
    scanJsonFrom(bytes, 512, state, bytes.length)
    return cuts
  }
  const without = (bytes: Buffer, ranges: readonly number[]): string => {
    const parts: Buffer[] = []
    let at = 0
    for (let c = 0; c < ranges.length; c += 2) {
      parts.push(bytes.subarray(at, ranges[c]))
      at = ranges[c + 1] as number
    }
    return Buffer.concat([...parts, bytes.subarray(at)]).toString('utf8')
  }

  test('notes the managedFields of every object of the map, and its end; the rest parses as the objects without them', () => {
    const objects = Array.from({ length: 5 }, (_, i) => deployment(i))
    // A field of that name elsewhere than metadata is the object's own data: a CRD may have one.
    ;(objects[1] as { spec: Record<string, unknown> }).spec['managedFields'] = [{ manager: 'mine' }]
    // The profile after the map has managedFields too: only the target kind's objects are cut.
    const profile = { ...loadExample(), metadata: { ...loadExample().metadata, managedFields: [{ manager: 'kubectl' }] } }
    const bytes = Buffer.from(goJson(targetSyncRequest(objects, { profile })))
    const cuts = cutsOf(bytes)
    assert.equal(cuts.ranges.length, 10)
    assert.equal(bytes[cuts.end - 1], 0x7d)
    assert.ok(bytes.subarray(cuts.end).toString().startsWith(',"KollectProfile.kollect.dev/v1alpha1":'), 'the end is the map\'s')
    const want = JSON.parse(bytes.toString()) as { related: Record<string, Record<string, KubeObject>> }
    for (const o of Object.values(want.related['Deployment.apps/v1'] ?? {})) delete (o.metadata as { managedFields?: unknown }).managedFields
    assert.deepEqual(JSON.parse(without(bytes, cuts.ranges)), want)
    // As it arrives, cut anywhere.
    for (const size of [1, 7, 100, 4096]) {
      const pieces = Array.from({ length: Math.ceil(bytes.length / size) }, (_, i) => Math.min(bytes.length, (i + 1) * size))
      assert.deepEqual(cutsOf(bytes, pieces), cuts, `${size} bytes at a time`)
    }
  })

  test('notes nothing but Go\'s own shape: no white space, a list after another member, a member or the object\'s end after it', () => {
    const body = (object: string) => Buffer.from(`{"related":{"Deployment.apps/v1":{"ns/a":${object}},"X":{}}}`)
    const cases: [string, number][] = [
      ['{"metadata":{"a":1,"managedFields":[{"m":"x"}],"name":"a"}}', 2],
      ['{"metadata":{"a":"x","managedFields":[]}}', 2],
      ['{"metadata":{"managedFields":[],"name":"a"}}', 0],
      ['{"metadata":{"a":1, "managedFields":[]}}', 0],
      ['{"metadata":{"a":1,"managedFields" :[]}}', 0],
      ['{"metadata":{"a":1,"managedFields":null}}', 0],
      ['{"metadata":{"a":1,"managedFields":[] }}', 0],
      ['{"metadata":{"a":{"b":1,"managedFields":[]}}}', 0],
      ['{"spec":{"a":1,"managedFields":[]}}', 0],
      ['{"metadata":{"a":"\\",\\"managedFields\\":[]"}}', 0],
      ['{"kind":"metadata","x":{"a":1,"managedFields":[]}}', 0],
      ['[{"metadata":{"a":1,"managedFields":[]}}]', 0],
    ]
    for (const [object, count] of cases) {
      const bytes = body(object)
      const cuts = cutsOf(bytes)
      assert.equal(cuts.ranges.length, count, object)
      const want = JSON.parse(bytes.toString()) as { related: Record<string, Record<string, { metadata: Record<string, unknown> }>> }
      if (count > 0) delete want.related['Deployment.apps/v1']?.['ns/a']?.metadata['managedFields']
      assert.deepEqual(JSON.parse(without(bytes, cuts.ranges)), want, object)
    }
  })
})

describe('readJson', () => {
  test('a leading byte order mark is dropped, as secure-json-parse does', () => {
    assert.deepEqual(readJson(Buffer.from('\ufeff{"a":1}'), 8), { ok: true, value: { a: 1 } })
  })

  test('a body too deep is refused before parsing, with the bound', () => {
    assert.deepEqual(readJson(Buffer.from('[[[1]]]'), 2), { ok: false, code: 'KOLLECT_ERR_HOOK_TOO_DEEP', detail: '2' })
  })

  test('what a scan as the body arrived gave is taken as it is: suspect goes to secure-json-parse, plain to JSON.parse', () => {
    const hostile = Buffer.from('{"a":{"__proto__":{"x":1}}}')
    assert.equal(readJson(hostile, 8).ok, false)
    assert.equal(readJson(hostile, 8, Scan.Suspect).ok, false)
    // Given as plain, the body is not scanned again: JSON.parse takes the key as data.
    const plain = readJson(hostile, 8, Scan.Plain)
    assert.ok(plain.ok && Object.hasOwn((plain.value as { a: object }).a, '__proto__'))
  })

  // Keys from a set that includes the dangerous ones, with any character possibly \u-escaped.
  const key = fc.constantFrom('__proto__', 'constructor', 'prototype', 'a', 'proto', '_c', 'é', 'x"y')
  const escaped = (s: string, mask: boolean[]) =>
    [...s].map((ch, i) => (mask[i % mask.length] ? '\\u' + ch.charCodeAt(0).toString(16).padStart(4, '0') : JSON.stringify(ch).slice(1, -1))).join('')
  const value: fc.Arbitrary<string> = fc.letrec<{ v: string }>((tie) => ({
    v: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      fc.jsonValue({ maxDepth: 1 }).map((v) => JSON.stringify(v)),
      fc.array(tie('v'), { maxLength: 3 }).map((xs) => `[${xs.join(',')}]`),
      fc.array(fc.tuple(key, fc.array(fc.boolean(), { minLength: 1, maxLength: 4 }), tie('v')), { maxLength: 3 })
        .map((kvs) => `{${kvs.map(([k, mask, v]) => `"${escaped(k, mask)}":${v}`).join(',')}}`),
    ),
  })).v

  test('gives what secure-json-parse gives, for any JSON with hostile keys in any spelling', () => {
    fc.assert(fc.property(value, (text) => {
      const got = readJson(Buffer.from(text), 512)
      const want = secure(text)
      assert.equal(got.ok, want.ok, text)
      if (got.ok && want.ok) assert.deepEqual(got.value, want.value, text)
    }), { numRuns: 2000 })
  })
})
