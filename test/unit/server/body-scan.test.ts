import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import type { KubeObject } from '../../../api/types.js'
import {
  knownMembers, memberDigest, MemberScan, objectMembers, spanDigest, onlySpaceAfter, skipSpace, skipValue, SPAN, type Known, type Member, type ScannedMember,
} from '../../../server/extraction/body-scan.js'
import { deployment, goJson, loadExampleCr, TYPES, targetSyncRequest } from '../../support/metacontroller.js'

// The incremental target sync trusts these byte ranges in place of JSON.parse: each must be
// exactly what JSON.parse would give, or the scan must refuse (null) so the body goes the ordinary way.

const buf = (text: string) => Buffer.from(text, 'utf8')

/** A Deployment whose strings and keys hold what a byte scanner gets wrong most easily. */
function awkward(i: number): KubeObject {
  const d = deployment(i)
  const meta = d.metadata as Record<string, unknown>
  meta['annotations'] = {
    ...(meta['annotations'] as Record<string, string>),
    'kollect.dev/quote': 'say "hi" \\ and \\"not the end\\"',
    'kollect.dev/brackets': '}]}] { [ {"x": [1,',
    'kollect.dev/trailing-backslash': 'C:\\dir\\',
    'kollect.dev/ünïcödé-ключ-鍵': 'värde 値 🚀 </script> \u2028',
  }
  meta['labels'] = { ...(meta['labels'] as Record<string, string>), 'ключ': 'значение' }
  ;(d['spec'] as Record<string, unknown>)['extra'] = { flags: [true, false, null], nums: [0, -1, 1.5e-7, 12345678901234], nested: [[[]], [{}, [{ a: [] }]]], empty: '' }
  return d
}

/**
 * Scans the object at start and every object value inside it, asserting each level against the
 * parsed value: keys in order, each value's bytes parse to the parsed member, each object's end
 * just past its `}`. Returns the end.
 */
function agree(b: Buffer, start: number, parsed: Record<string, unknown>, where = '$'): number {
  const got = objectMembers(b, start)
  assert.ok(got, `${where}: refused`)
  assert.equal(b[got.end - 1], 0x7d, `${where}: end is not just past a }`)
  assert.deepEqual(JSON.parse(b.toString('utf8', start, got.end)), parsed, `${where}: object bytes`)
  assert.deepEqual(got.members.map((m) => m.key), Object.keys(parsed), `${where}: keys`)
  for (const m of got.members) {
    const value = parsed[m.key]
    assert.deepEqual(JSON.parse(b.toString('utf8', m.start, m.end)), value, `${where}.${m.key}: value bytes`)
    // The whole member, key to value end, is what an incremental body copies.
    assert.deepEqual(JSON.parse(`{${b.toString('utf8', m.keyStart, m.end)}}`), { [m.key]: value }, `${where}.${m.key}: member bytes`)
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      assert.equal(agree(b, m.start, value as Record<string, unknown>, `${where}.${m.key}`), m.end, `${where}.${m.key}: nested end`)
    }
  }
  return got.end
}

/** Where the value of the member keyed key (in the object at start) begins. */
function valueOf(b: Buffer, start: number, key: string): number {
  const m = objectMembers(b, start)?.members.find((x) => x.key === key)
  assert.ok(m, `no member ${key}`)
  return m.start
}

/** Where the Deployment map of a target sync body begins. */
const deploymentMap = (b: Buffer) => valueOf(b, valueOf(b, 0, 'related'), TYPES.deployment)

const plain = (members: readonly (Member & { digest?: string })[]): Member[] => members.map(({ key, keyStart, start, end }) => ({ key, keyStart, start, end }))

/** The members of b as a next scan knows them, one by one (no spans). */
function known(b: Buffer, members: readonly Member[]): Known {
  return { members: knownMembers(b, members).members, spans: [] }
}

const byName = (a: KubeObject, b: KubeObject) => ((a.metadata?.name as string) < (b.metadata?.name as string) ? -1 : 1)

describe('agreement with JSON.parse', () => {
  const bodies: { reason: string; text: string }[] = [
    { reason: 'a Go-written target sync with 3 Deployments', text: goJson(targetSyncRequest([0, 1, 2].map((i) => deployment(i)))) },
    { reason: 'non-ASCII keys and values, escaped quotes and backslashes, brackets in strings, nested arrays, literals', text: goJson(targetSyncRequest([awkward(0), awkward(1)])) },
    { reason: 'the same, indented (white space between every token)', text: JSON.stringify(targetSyncRequest([awkward(0), awkward(1)]), null, 2) },
    { reason: 'tabs, CR LF and spaces around colons and commas', text: ' {\t"a" :\r\n{ "b" : [ 1 , { "c" : "}" } ] , "d":\t-0.5e+2 }\n, "e" : true ,"f":false,"g" :null , "h":{}, "i":[] }\r\n' },
  ]
  for (const c of bodies) {
    test(c.reason, () => {
      const b = buf(c.text)
      const start = skipSpace(b, 0)
      const end = agree(b, start, JSON.parse(c.text) as Record<string, unknown>)
      assert.equal(end, Buffer.byteLength(c.text.trimEnd()))
      assert.ok(onlySpaceAfter(b, end))
    })
  }

  test('the non-ASCII body really holds multi-byte UTF-8 keys and escapes in values (the cases above are not vacuous)', () => {
    const text = goJson(targetSyncRequest([awkward(0)]))
    assert.ok(text.includes('"ключ":"значение"'))
    assert.ok(text.includes('\\\\\\"not the end\\\\\\"'))
    assert.ok(text.includes('C:\\\\dir\\\\"'))
    assert.ok(text.includes('\\u003c/script\\u003e \\u2028'))
    assert.notEqual(buf(text).length, text.length)
  })

  test('an empty object, with and without white space inside', () => {
    assert.deepEqual(objectMembers(buf('{}'), 0), { members: [], end: 2 })
    assert.deepEqual(objectMembers(buf('{ \n}  '), 0), { members: [], end: 4 })
  })

  test('exact ranges for a small object', () => {
    assert.deepEqual(objectMembers(buf('{"a":1, "bb" : "x,}" ,"c":[{}]}'), 0), {
      members: [
        { key: 'a', keyStart: 1, start: 5, end: 6 },
        { key: 'bb', keyStart: 8, start: 15, end: 20 },
        { key: 'c', keyStart: 22, start: 26, end: 30 },
      ],
      end: 31,
    })
  })

  // Any object with unique keys, written with random white space: null exactly when a key needs an escape.
  const space = fc.constantFrom('', ' ', '\n', '\t', '\r\n ')
  const entries = fc.uniqueArray(fc.tuple(fc.string({ unit: 'binary', maxLength: 6 }), fc.jsonValue({ maxDepth: 3 }), space, space, space), {
    maxLength: 8,
    selector: ([k]) => k,
  })
  test('any object with unique keys: keys and value bytes as JSON.parse reads them, or null when a key holds an escape', () => {
    const seen = { refused: 0, read: 0 }
    fc.assert(fc.property(entries, space, (kvs, pad) => {
      const text = `{${pad}${kvs.map(([k, v, s1, s2, s3]) => `${s1}${JSON.stringify(k)}${s2}:${s3}${JSON.stringify(v)}${pad}`).join(',')}}${pad}`
      const b = buf(text)
      const got = objectMembers(b, 0)
      if (kvs.some(([k]) => JSON.stringify(k).includes('\\'))) {
        assert.equal(got, null, text)
        seen.refused++
        return
      }
      assert.ok(got, text)
      seen.read++
      assert.equal(got.end, b.length - buf(pad).length, text)
      assert.deepEqual(got.members.map((m) => m.key), kvs.map(([k]) => k), text)
      got.members.forEach((m, i) => assert.deepEqual(JSON.parse(b.toString('utf8', m.start, m.end)), JSON.parse(JSON.stringify(kvs[i]?.[1])), text))
    }), { numRuns: 1000 })
    // Both outcomes were exercised, so neither branch above is vacuous (about 6% of runs hold an
    // escaped key: fewer than 10 in 1,000 does not happen by chance).
    assert.ok(seen.refused >= 10 && seen.read >= 10, JSON.stringify(seen))
  })
})

describe('refusals', () => {
  const cases: { reason: string; text: string; start?: number }[] = [
    { reason: 'a duplicate key', text: '{"a":1,"b":2,"a":3}' },
    { reason: 'a duplicate key, the second spelled with different white space around it', text: '{"a":{"x":1}, "a" :{"x":1}}' },
    { reason: 'a key with a \\u escape', text: '{"a\\u0062":1}' },
    { reason: 'a key spelled with an escape that would duplicate another under JSON.parse', text: '{"ab":1,"a\\u0062":2}' },
    { reason: 'a key with an escaped quote', text: '{"a\\"b":1}' },
    { reason: 'a key with an escaped backslash', text: '{"a\\\\":1}' },
    { reason: 'a key that is not a string', text: '{a:1}' },
    { reason: 'a missing colon', text: '{"a" 1}' },
    { reason: 'a key and no value', text: '{"a"}' },
    { reason: 'a colon and no value', text: '{"a":}' },
    { reason: 'a comma in place of a value', text: '{"a":,"b":1}' },
    { reason: 'a closing bracket in place of a value', text: '{"a":]}' },
    { reason: 'a missing comma between scalars', text: '{"a":1 "b":2}' },
    { reason: 'a missing comma after an object', text: '{"a":{}"b":2}' },
    { reason: 'two values for one key', text: '{"a":"x" "y"}' },
    { reason: 'a trailing comma', text: '{"a":1,}' },
    { reason: 'a leading comma', text: '{,"a":1}' },
    { reason: 'a closing bracket ends the object', text: '{"a":1]' },
    { reason: 'an array at start', text: '[{"a":1}]' },
    { reason: 'a string at start', text: '"{}"' },
    { reason: 'white space at start (the caller skips it)', text: ' {"a":1}' },
    { reason: 'a start past the end', text: '{}', start: 2 },
    { reason: 'an unterminated string value', text: '{"a":"bc' },
    { reason: 'a string value whose closing quote is escaped', text: '{"a":"b\\"}' },
    { reason: 'an unterminated key', text: '{"ab' },
    { reason: 'an object value unbalanced at the end of the buffer', text: '{"a":{"b":[1,2}' },
    { reason: 'an array value unbalanced at the end of the buffer', text: '{"a":[[1]' },
    { reason: 'the object not closed after a complete value', text: '{"a":[1,2]' },
    { reason: 'the object not closed after a scalar', text: '{"a":1' },
    { reason: 'the object not closed after a comma', text: '{"a":1,' },
    { reason: 'an empty buffer', text: '' },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const b = buf(c.text)
      assert.equal(objectMembers(b, c.start ?? 0), null)
      const scan = new MemberScan(b, c.start ?? 0)
      assert.equal(scan.step(), false)
      assert.equal(scan.result, null)
    })
  }

  test('a value\'s inside is not checked: mismatched brackets, a bare word and an inner duplicate key are skipped by depth', () => {
    // The extraction child's JSON.parse checks these bytes; a caller must not use bytes it has not seen parsed.
    const text = '{"a":{"x":],"b":nope,"c":{"k":1,"k":2},"d":[}}'
    assert.throws(() => JSON.parse(text), SyntaxError)
    assert.deepEqual(objectMembers(buf(text), 0), {
      members: [
        { key: 'a', keyStart: 1, start: 5, end: 11 },
        { key: 'b', keyStart: 12, start: 16, end: 20 },
        { key: 'c', keyStart: 21, start: 25, end: 38 },
        { key: 'd', keyStart: 39, start: 43, end: 45 },
      ],
      end: 46,
    })
    assert.deepEqual(objectMembers(buf('{"a":{"x":]}'), 0), { members: [{ key: 'a', keyStart: 1, start: 5, end: 11 }], end: 12 })
  })
})

describe('stopAt, paused and resume', () => {
  const body = buf(goJson(targetSyncRequest([0, 1, 2, 3].map((i) => deployment(i)))))
  const whole = objectMembers(body, 0)
  assert.ok(whole)
  const related = whole.members.find((m) => m.key === 'related')
  assert.ok(related)

  test('pauses at the stopAt member with start at its value and end -1; resume with its end completes the scan', () => {
    const scan = new MemberScan(body, 0, { stopAt: 'related' })
    assert.equal(scan.step(), true)
    assert.deepEqual(scan.paused, { key: 'related', keyStart: related.keyStart, start: related.start, end: -1 })
    assert.equal(body[related.start], 0x7b)
    assert.deepEqual(scan.members.map((m) => m.key), ['controller', 'parent', 'children'])
    assert.equal(scan.result, null)
    // Stepping while paused reads nothing more: the caller owes the value's end.
    assert.equal(scan.step(), true)
    assert.equal(scan.members.length, 3)

    scan.resume(skipValue(body, related.start))
    assert.equal(scan.paused, null)
    assert.equal(scan.result, null, 'the member after related is not read yet')
    assert.equal(scan.step(), false)
    assert.deepEqual(scan.result, whole)
    assert.deepEqual(whole.members.map((m) => m.key), ['controller', 'parent', 'children', 'related', 'finalizing'])
    assert.equal(scan.end, body.length)
  })

  test('resume(-1): the paused value was malformed, and the scan is refused', () => {
    const scan = new MemberScan(body, 0, { stopAt: 'related' })
    assert.equal(scan.step(), true)
    scan.resume(-1)
    assert.equal(scan.paused, null)
    assert.equal(scan.step(), false)
    assert.equal(scan.result, null)
  })

  test('pausing at the last member; resume finishes without another step', () => {
    const scan = new MemberScan(body, 0, { stopAt: 'finalizing' })
    assert.equal(scan.step(), true)
    assert.ok(scan.paused)
    scan.resume(skipValue(body, scan.paused.start))
    assert.deepEqual(scan.result, whole)
  })

  test('a stopAt key that is absent: no pause, the whole object', () => {
    const scan = new MemberScan(body, 0, { stopAt: 'nothere' })
    assert.equal(scan.step(), false)
    assert.equal(scan.paused, null)
    assert.deepEqual(scan.result, whole)
  })

  test('the stopAt key twice: pauses at the first, refused at the second', () => {
    const b = buf('{"r":{},"r":{}}')
    const scan = new MemberScan(b, 0, { stopAt: 'r' })
    assert.equal(scan.step(), true)
    assert.ok(scan.paused)
    scan.resume(skipValue(b, scan.paused.start))
    assert.equal(scan.step(), false)
    assert.equal(scan.result, null)
  })

  test('nested pauses, as an incremental sync reads a body: top level, related, then the target kind\'s map', () => {
    const top = new MemberScan(body, 0, { stopAt: 'related' })
    top.step()
    assert.ok(top.paused)
    const rel = new MemberScan(body, top.paused.start, { stopAt: TYPES.deployment })
    rel.step()
    assert.ok(rel.paused)
    const objects = objectMembers(body, rel.paused.start)
    assert.ok(objects)
    assert.deepEqual(objects.members.map((m) => m.key), [0, 1, 2, 3].map((i) => `team-a/web-0000${i}`))
    rel.resume(objects.end)
    rel.step()
    assert.equal(rel.end, related.end)
    top.resume(rel.end)
    top.step()
    assert.deepEqual(top.result, whole)
  })
})

describe('step(max)', () => {
  const body = buf(goJson(targetSyncRequest(Array.from({ length: 20 }, (_, i) => deployment(i)))))
  const at = deploymentMap(body)
  const whole = objectMembers(body, at)
  assert.ok(whole)

  test('three members a step: true while more remain, the same members and end as one step', () => {
    const scan = new MemberScan(body, at)
    const counts: number[] = []
    const more: boolean[] = []
    for (;;) {
      const again = scan.step(3)
      more.push(again)
      counts.push(scan.members.length)
      if (!again) break
    }
    assert.deepEqual(counts, [3, 6, 9, 12, 15, 18, 20])
    assert.deepEqual(more, [true, true, true, true, true, true, false])
    assert.deepEqual(scan.result, whole)
    assert.equal(whole.members.length, 20)
  })

  test('three a step with a previous body: the same as one step with it', () => {
    const previous = known(body, whole.members)
    const one = new MemberScan(body, at, { previous })
    one.step()
    const batched = new MemberScan(body, at, { previous })
    while (batched.step(3));
    assert.deepEqual(batched.result, one.result)
    assert.equal(batched.members.filter((m) => m.digest !== undefined).length, 20)
  })

  test('a step after the end, or after a refusal, reads nothing', () => {
    const scan = new MemberScan(body, at)
    scan.step()
    assert.equal(scan.step(), false)
    assert.deepEqual(scan.result, whole)
    const bad = new MemberScan(buf('{"a":1,,"b":2}'), 0)
    assert.equal(bad.step(1), true)
    assert.equal(bad.step(1), false)
    assert.equal(bad.step(1), false)
    assert.equal(bad.result, null)
    assert.equal(bad.members.length, 1)
  })
})

describe('the previous members', () => {
  const N = 20
  const A = buf(goJson(targetSyncRequest(Array.from({ length: N }, (_, i) => deployment(i)))))
  const aMap = objectMembers(A, deploymentMap(A))
  assert.ok(aMap)
  const previous = known(A, aMap.members)
  const aBytes = new Map(aMap.members.map((m) => [m.key, A.subarray(m.keyStart, m.end)]))
  const key = (i: number) => `team-a/web-${String(i).padStart(5, '0')}`

  /** Scans B's Deployment map with previous: the scan, and what a plain scan of it gives. */
  function scanWith(B: Buffer, prev: Known) {
    const at = deploymentMap(B)
    const base = objectMembers(B, at)
    const got = objectMembers(B, at, prev) as { members: (Member & { digest?: string })[]; end: number } | null
    assert.ok(base)
    assert.ok(got)
    assert.deepEqual(plain(got.members), base.members, 'keys and ranges as a plain scan')
    assert.equal(got.end, base.end)
    for (const m of got.members) {
      if (m.digest === undefined) continue
      assert.equal(m.digest, memberDigest(B, m.keyStart, m.end), `${m.key}: digest of its own bytes`)
      assert.equal(m.digest, prev.members.find((p) => p.key === m.key)?.digest, `${m.key}: the known digest`)
      assert.ok(B.subarray(m.keyStart, m.end).equals(aBytes.get(m.key) as Buffer), `${m.key}: marked with other bytes`)
    }
    return got.members
  }
  const marked = (members: readonly (Member & { digest?: string })[]) => members.filter((m) => m.digest !== undefined).map((m) => m.key)

  test('one changed, one removed, one added, offsets shifted: unchanged members are marked, the others read', () => {
    const CHANGED = 3
    const REMOVED = 11
    const list = Array.from({ length: N }, (_, i) => deployment(i)).filter((_, i) => i !== REMOVED)
    ;(list[CHANGED]?.['spec'] as { replicas: number }).replicas = 9
    const added = deployment(50, { name: 'web-00007x' })
    // A longer parent: every offset in B is past A's.
    const target = loadExampleCr('target-deployments.yaml')
    target.metadata = { ...target.metadata, annotations: { note: 'x'.repeat(37) } }
    const B = buf(goJson(targetSyncRequest([...list, added].sort(byName), { target })))
    assert.ok(deploymentMap(B) > deploymentMap(A))

    const members = scanWith(B, previous)
    const keys = members.map((m) => m.key)
    assert.deepEqual(keys, [...Array.from({ length: 8 }, (_, i) => key(i)), 'team-a/web-00007x', ...Array.from({ length: 12 }, (_, i) => key(i + 8)).filter((k) => k !== key(REMOVED))])
    // Including the one just after the removed member.
    const unmarked = [key(CHANGED), 'team-a/web-00007x']
    assert.deepEqual(marked(members), keys.filter((k) => !unmarked.includes(k)))
    assert.notEqual(memberDigest(B, members[CHANGED]!.keyStart, members[CHANGED]!.end), previous.members[CHANGED]!.digest)
  })

  test('runs of removed members, first and last ones among them: every remaining member marked', () => {
    const gone = new Set([0, 1, 9, 10, 11, 18, 19])
    const B = buf(goJson(targetSyncRequest(Array.from({ length: N }, (_, i) => deployment(i)).filter((_, i) => !gone.has(i)))))
    const members = scanWith(B, previous)
    const kept = Array.from({ length: N }, (_, i) => i).filter((i) => !gone.has(i)).map(key)
    assert.deepEqual(members.map((m) => m.key), kept)
    assert.deepEqual(marked(members), kept)
  })

  test('the same key and resourceVersion with other bytes (a body that lies) is read, not marked', () => {
    const LIAR = 5
    const list = Array.from({ length: N }, (_, i) => deployment(i))
    const liar = deployment(LIAR, { image: 'evil.example.com/x:1' })
    assert.equal(liar.metadata?.resourceVersion, list[LIAR]?.metadata?.resourceVersion)
    list[LIAR] = liar
    const B = buf(goJson(targetSyncRequest(list)))
    const members = scanWith(B, previous)
    assert.deepEqual(marked(members), Array.from({ length: N }, (_, i) => key(i)).filter((k) => k !== key(LIAR)))
  })

  test('a body identical to the last: every member marked, with the known digests', () => {
    const members = scanWith(A, previous)
    assert.deepEqual(members.map((m) => m.digest), previous.members.map((p) => p.digest))
  })

  test('previous in another order: keys and ranges as a plain scan, only bytes-identical members marked', () => {
    const list = Array.from({ length: N }, (_, i) => deployment(i))
    ;(list[0]?.['spec'] as { replicas: number }).replicas = 9
    ;(list[N - 1]?.['spec'] as { replicas: number }).replicas = 9
    const B = buf(goJson(targetSyncRequest(list)))
    const shuffled = { members: [...previous.members.slice(10), ...previous.members.slice(0, 10)], spans: [] }
    const members = scanWith(B, shuffled)
    assert.ok(!marked(members).includes(key(0)) && !marked(members).includes(key(N - 1)))
    // Some are marked, so scanWith's bytes-identical checks are not vacuous.
    assert.ok(marked(members).length > 0)
    const reversed = { members: [...previous.members].reverse(), spans: [] }
    scanWith(B, reversed)
    scanWith(A, reversed)
  })

  test('a known member whose bytes are a prefix of the new member (a longer number) is not taken', () => {
    const a = buf('{"a":12,"b":1}')
    const prev = known(a, objectMembers(a, 0)!.members)
    const b = buf('{"a":123,"b":1}')
    assert.deepEqual(objectMembers(b, 0, prev), {
      members: [{ key: 'a', keyStart: 1, start: 5, end: 8 }, { key: 'b', keyStart: 9, start: 13, end: 14, digest: prev.members[1]!.digest }],
      end: 15,
    })
    // Followed by white space, a comma or the object's end, the same bytes are the same member.
    assert.equal(objectMembers(buf('{"a":12 , "b":1 }'), 0, prev)?.members.every((m) => 'digest' in m), true)
  })

  test('a member taken by its hash still counts for duplicate keys', () => {
    const a = buf('{"a":{"x":1}}')
    const one = known(a, objectMembers(a, 0)!.members)
    assert.equal(objectMembers(buf('{"a":{"x":1},"a":{"x":1}}'), 0, { members: [...one.members, ...one.members], spans: [] }), null)
    assert.equal(objectMembers(buf('{"a":{"x":1},"a":{"x":2}}'), 0, one), null)
  })
})

describe('spans: runs of known members hashed as one', () => {
  // More than two spans' worth, so that a body has whole spans and a partial last one.
  const N = 2 * SPAN + 22
  const list = (edit: (d: KubeObject, i: number) => KubeObject | null = (d) => d) =>
    Array.from({ length: N }, (_, i) => edit(deployment(i), i)).filter((d): d is KubeObject => d !== null)
  const bodyOf = (objects: KubeObject[]) => buf(goJson(targetSyncRequest(objects)))
  const A = bodyOf(list())
  const aMembers = objectMembers(A, deploymentMap(A))?.members ?? []
  const aKnown = knownMembers(A, aMembers)
  const aBytes = new Map(aMembers.map((m) => [m.key, A.subarray(m.keyStart, m.end)]))
  const replicas = (d: KubeObject, n: number) => ((d['spec'] as { replicas: number }).replicas = n, d)

  /** Scans B with prev: keys and ranges as a plain scan, every marked member byte-identical to its previous bytes. */
  function scanWith(B: Buffer, prev: Known): ScannedMember[] {
    const at = deploymentMap(B)
    const base = objectMembers(B, at)
    const got = objectMembers(B, at, prev)
    assert.ok(base && got)
    assert.deepEqual(plain(got.members), base.members)
    assert.equal(got.end, base.end)
    for (const m of got.members) {
      if (m.digest === undefined) {
        assert.equal(m.span, undefined, `${m.key}: in a span but not marked`)
        continue
      }
      assert.equal(m.digest, memberDigest(B, m.keyStart, m.end), `${m.key}: digest of its own bytes`)
      assert.ok(B.subarray(m.keyStart, m.end).equals(aBytes.get(m.key) as Buffer), `${m.key}: marked with other bytes`)
    }
    return got.members
  }
  const spanned = (members: readonly ScannedMember[]) => members.filter((m) => m.span !== undefined).map((m) => m.key)
  const marked = (members: readonly ScannedMember[]) => members.filter((m) => m.digest !== undefined).map((m) => m.key)

  test('a first body: every member hashed one by one, and grouped in order into spans of at most SPAN, each the hash of its bytes', () => {
    assert.deepEqual(aKnown.members.map((m) => m.digest), aMembers.map((m) => memberDigest(A, m.keyStart, m.end)))
    assert.deepEqual(aKnown.members.map((m) => m.at), aMembers.map((m) => m.keyStart))
    assert.deepEqual(aKnown.spans.map((s) => [s.first, s.count]), [[0, SPAN], [SPAN, SPAN], [2 * SPAN, 22]])
    for (const s of aKnown.spans) {
      const first = aMembers[s.first] as Member
      const last = aMembers[s.first + s.count - 1] as Member
      assert.equal(s.length, last.end - first.keyStart)
      assert.equal(s.digest, spanDigest(A, first.keyStart, last.end))
      assert.equal(s.digests, aMembers.slice(s.first, s.first + s.count).map((m) => memberDigest(A, m.keyStart, m.end)).join("\n"))
    }
  })

  test('the same body again: every span taken whole, every member marked with its known digest', () => {
    const members = scanWith(A, aKnown)
    assert.deepEqual(spanned(members), aMembers.map((m) => m.key))
    assert.deepEqual(members.map((m) => m.digest), aKnown.members.map((m) => m.digest))
    // And the spans carry over as they were: the next scan hashes nothing new.
    assert.deepEqual(knownMembers(A, members), aKnown)
  })

  test('one member changed: its span is read member by member, the others are taken whole, and the next spans keep theirs and rehash one', () => {
    const CHANGED = SPAN + 5
    const B = bodyOf(list((d, i) => (i === CHANGED ? replicas(d, 9) : d)))
    const members = scanWith(B, aKnown)
    const inSecond = (i: number) => i >= SPAN && i < 2 * SPAN
    assert.deepEqual(spanned(members), aMembers.filter((_, i) => !inSecond(i)).map((m) => m.key))
    assert.deepEqual(marked(members), aMembers.filter((_, i) => i !== CHANGED).map((m) => m.key))
    const next = knownMembers(B, members)
    assert.deepEqual(next.spans.map((s) => [s.first, s.count]), [[0, SPAN], [SPAN, SPAN], [2 * SPAN, 22]])
    assert.deepEqual([next.spans[0], next.spans[2]], [aKnown.spans[0], aKnown.spans[2]])
    assert.notEqual(next.spans[1]?.digest, aKnown.spans[1]?.digest)
    // The chain goes on: B again is taken whole.
    assert.equal(spanned(objectMembers(B, deploymentMap(B), next)?.members ?? []).length, N)
  })

  test('members added before and removed inside spans: offsets shift, the untouched spans are still taken whole', () => {
    const target = loadExampleCr('target-deployments.yaml')
    target.metadata = { ...target.metadata, annotations: { note: 'y'.repeat(91) } }
    const REMOVED = 3
    const B = buf(goJson(targetSyncRequest([...list((d, i) => (i === REMOVED ? null : d)), deployment(900, { name: 'web-00000a' })].sort(byName), { target })))
    assert.ok(deploymentMap(B) > deploymentMap(A))
    const members = scanWith(B, aKnown)
    assert.deepEqual(spanned(members), aMembers.slice(SPAN).map((m) => m.key))
    assert.deepEqual(marked(members), aMembers.filter((_, i) => i !== REMOVED).map((m) => m.key))
  })

  test('a span whose bytes are as long but differ (a body that lies about one object) is not taken; only the untouched members are marked', () => {
    const LIAR = 7
    const image = (deployment(LIAR)['spec'] as { template: { spec: { containers: { image: string }[] } } }).template.spec.containers[0]?.image ?? ''
    const liar = deployment(LIAR, { image: image.replace(/.$/, (c) => (c === 'x' ? 'y' : 'x')) })
    const B = bodyOf(list((d, i) => (i === LIAR ? liar : d)))
    assert.equal(B.length, A.length, 'the same length: only the hash tells them apart')
    const members = scanWith(B, aKnown)
    assert.deepEqual(spanned(members), aMembers.slice(SPAN).map((m) => m.key))
    assert.deepEqual(marked(members), aMembers.filter((_, i) => i !== LIAR).map((m) => m.key))
  })

  test('a span followed by more bytes of its last value (a longer number) is not taken whole', () => {
    const a = buf('{"a":1,"b":2,"c":12}')
    const prev = knownMembers(a, objectMembers(a, 0)?.members ?? [])
    assert.deepEqual(prev.spans.map((s) => [s.first, s.count]), [[0, 3]])
    const got = objectMembers(buf('{"a":1,"b":2,"c":123}'), 0, prev)
    assert.deepEqual(got?.members.map((m) => [m.key, m.digest !== undefined, m.span !== undefined]), [['a', true, false], ['b', true, false], ['c', false, false]])
  })

  test('a key of a span taken whole that comes again later is a duplicate: refused', () => {
    const a = buf('{"a":1,"b":2}')
    const prev = knownMembers(a, objectMembers(a, 0)?.members ?? [])
    assert.equal(objectMembers(buf('{"a":1,"b":2,"b":3}'), 0, prev), null)
    assert.equal(objectMembers(buf('{"a":1,"b":2,"a":1}'), 0, prev), null)
  })

  test('any chain of bodies (objects removed, changed, added): each scan agrees with a plain scan and marks only identical bytes', () => {
    const edits = fc.array(fc.record({ gone: fc.boolean(), changed: fc.boolean() }), { minLength: N, maxLength: N })
    fc.assert(fc.property(fc.array(edits, { minLength: 1, maxLength: 3 }), fc.integer({ min: 0, max: 5 }), (rounds, added) => {
      let prev = aKnown
      let before = aBytes
      for (const [r, round] of rounds.entries()) {
        const objects = list((d, i) => (round[i]?.gone ? null : round[i]?.changed ? replicas(d, 10 + r) : d))
        for (let k = 0; k < added; k++) objects.push(deployment(1000 + k, { name: `web-${String(k * 37).padStart(5, '0')}z` }))
        const B = bodyOf(objects.sort(byName))
        const at = deploymentMap(B)
        const got = objectMembers(B, at, prev)
        assert.ok(got)
        assert.deepEqual(plain(got.members), objectMembers(B, at)?.members)
        for (const m of got.members) {
          if (m.digest !== undefined) assert.ok(B.subarray(m.keyStart, m.end).equals(before.get(m.key) as Buffer), `${m.key}: marked with other bytes`)
        }
        // Every member that came again byte for byte is marked, whether its span came whole or not.
        const identical = got.members.filter((m) => before.get(m.key)?.equals(B.subarray(m.keyStart, m.end)) ?? false).map((m) => m.key)
        assert.deepEqual(got.members.filter((m) => m.digest !== undefined).map((m) => m.key), identical)
        prev = knownMembers(B, got.members)
        before = new Map(got.members.map((m) => [m.key, B.subarray(m.keyStart, m.end)]))
      }
    }), { numRuns: 25 })
  })
})

describe('a body as it arrives (complete: false, then grow())', () => {
  type Options = { previous?: Known; sorted?: boolean; stopAt?: string }
  /** Scans b given its bytes up to each cut in turn, as they arrive; the scan, and how often it stopped short. */
  function arriving(b: Buffer, at: number, cuts: number[], options: Options): { scan: MemberScan; shorts: number } {
    const ends = [...new Set(cuts.filter((c) => c > at && c < b.length))].sort((x, y) => x - y).concat(b.length)
    let k = 0
    const scan = new MemberScan(b.subarray(0, ends[0]), at, { ...options, complete: ends.length === 1 })
    let shorts = 0
    for (scan.step(); scan.short; scan.step()) {
      shorts++
      k++
      scan.grow(b.subarray(0, ends[k]), k === ends.length - 1)
    }
    return { scan, shorts }
  }
  const wholeScan = (b: Buffer, at: number, options: Options) => {
    const scan = new MemberScan(b, at, options)
    scan.step()
    return scan
  }
  // Three spans and more; B changes some, drops some and adds one, in key order as Go writes the map.
  const objects = Array.from({ length: 150 }, (_, i) => deployment(i))
  const A = buf(goJson(targetSyncRequest(objects)))
  const aAt = deploymentMap(A)
  const aKnown = knownMembers(A, wholeScan(A, aAt, { sorted: true }).members)
  const bObjects = objects.filter((_, i) => i % 41 !== 7).map((d, i) => (i % 53 === 5 ? deployment(i, { image: 'registry.example.com/other:2' }) : d))
  bObjects.push(deployment(900, { name: 'web-00100b' }))
  const B = buf(goJson(targetSyncRequest(bObjects)))
  const bAt = deploymentMap(B)

  test('cut anywhere: the same members, digests, spans and end as the whole body at once, with or without the previous members', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 0, max: B.length }), { maxLength: 60 }), fc.boolean(), fc.boolean(), (cuts, withPrevious, sorted) => {
      const options = { ...(withPrevious ? { previous: aKnown } : {}), sorted }
      const whole = wholeScan(B, bAt, options)
      assert.ok(whole.result)
      const { scan } = arriving(B, bAt, cuts, options)
      assert.deepEqual(scan.members, whole.members)
      assert.deepEqual(scan.result, whole.result)
    }), { numRuns: 60 })
  })

  test('one byte at a time: short until the bytes come, never refused, and the same as at once', () => {
    const small = buf('{"a":1,"bb":"x,}","c":[{"d":"]"}],"e":true}')
    const prev = knownMembers(small, objectMembers(small, 0)?.members ?? [])
    for (const options of [{}, { previous: prev }, { sorted: true }, { previous: prev, sorted: true }]) {
      const { scan, shorts } = arriving(small, 0, Array.from({ length: small.length }, (_, i) => i), options)
      assert.deepEqual(scan.result, wholeScan(small, 0, options).result)
      assert.ok(shorts > 0)
    }
  })

  test('a body that ended early is refused once it is complete, not left short', () => {
    const cut = B.subarray(0, bAt + 5000)
    const scan = new MemberScan(cut, bAt, { previous: aKnown, sorted: true, complete: false })
    scan.step()
    assert.equal(scan.short, true)
    assert.equal(scan.result, null)
    scan.grow(cut, true)
    assert.equal(scan.step(), false)
    assert.equal(scan.short, false)
    assert.equal(scan.result, null)
  })

  test('a paused member resumed before the bytes after its value came: the next step reads them', () => {
    const b = buf('{"a":1,"r":{"x":2} , "z":3}')
    const valueEnd = b.indexOf('}') + 1
    const scan = new MemberScan(b.subarray(0, valueEnd), 0, { stopAt: 'r', complete: false })
    assert.equal(scan.step(), true)
    assert.equal(scan.paused?.key, 'r')
    scan.resume(valueEnd)
    assert.equal(scan.result, null)
    assert.equal(scan.step(), false)
    assert.equal(scan.short, true)
    scan.grow(b, true)
    assert.equal(scan.step(), false)
    assert.deepEqual(scan.result, objectMembers(b, 0))
  })

  test('sorted: a key that does not rise is refused, a duplicate with it, without a set of every key', () => {
    assert.ok(wholeScan(buf('{"a":1,"b":2,"c":3}'), 0, { sorted: true }).result)
    assert.equal(wholeScan(buf('{"a":1,"c":2,"b":3}'), 0, { sorted: true }).result, null)
    assert.equal(wholeScan(buf('{"a":1,"b":2,"b":3}'), 0, { sorted: true }).result, null)
    // A span of a previous body taken whole, then a key that falls back into it.
    const a = buf('{"a":1,"b":2,"c":3}')
    const prev = knownMembers(a, objectMembers(a, 0)?.members ?? [])
    assert.ok(wholeScan(a, 0, { previous: prev, sorted: true }).result)
    assert.equal(wholeScan(buf('{"a":1,"b":2,"c":3,"b":4}'), 0, { previous: prev, sorted: true }).result, null)
    // Without sorted, order is the body's own business.
    assert.ok(wholeScan(buf('{"a":1,"c":2,"b":3}'), 0, {}).result)
  })
})

describe('onlySpaceAfter, skipSpace, skipValue', () => {
  test('onlySpaceAfter: JSON white space (space, tab, CR, LF) to the end, or nothing', () => {
    const b = buf('{"a":1} \t\r\n')
    assert.equal(onlySpaceAfter(b, 7), true)
    assert.equal(onlySpaceAfter(b, b.length), true)
    assert.equal(onlySpaceAfter(b, 6), false)
    assert.equal(onlySpaceAfter(buf('{} x'), 2), false)
    assert.equal(onlySpaceAfter(buf('{}{}'), 2), false)
    assert.equal(onlySpaceAfter(buf('{}  \u00a0'), 2), false, 'a no-break space is not JSON white space')
    assert.equal(onlySpaceAfter(buf('{}\f'), 2), false, 'nor is a form feed')
    assert.equal(onlySpaceAfter(buf('{}\v'), 2), false, 'nor a vertical tab')
    assert.equal(onlySpaceAfter(buf('{} \n\0'), 2), false)
  })

  test('skipSpace stops at the first other byte, or at the end', () => {
    assert.equal(skipSpace(buf(' \t\r\nx'), 0), 4)
    assert.equal(skipSpace(buf('x  '), 0), 0)
    assert.equal(skipSpace(buf('x  '), 1), 3)
  })

  test('skipValue: the end of each kind of value, -1 when there is none', () => {
    const cases: [string, number][] = [
      ['true,', 4],
      ['null}', 4],
      ['-1.5e3]', 6],
      ['7 ', 1],
      ['0', 1],
      ['"a\\"b\\\\",', 8],
      ['"}]",', 4],
      ['[1,[2,{"a":"]"}]],', 17],
      ['{"a":{}} ', 8],
      [',', -1],
      ['}', -1],
      [' 1', -1],
      ['', -1],
      ['"abc', -1],
      ['"a\\"', -1],
      ['[[]', -1],
      ['{"a":"}"', -1],
    ]
    for (const [text, want] of cases) assert.equal(skipValue(buf(text), 0), want, text)
  })
})
