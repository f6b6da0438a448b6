// Exact outputs of the name escapers and the path template; test/security/properties.test.ts
// covers their properties (injective, one segment, inside root) over arbitrary strings.
import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import path from 'node:path'
import { escapePathSegment, escapeSubjectToken, quoteIdent, renderPath, resolveInside } from '../../../sinks/escape.js'

const ROOT = path.resolve('/srv/kollect')
const VALUES = { cluster: 'lab-west', namespace: 'team-a', name: 'prod' }

describe('escapePathSegment', () => {
  const cases: { reason: string; name: string; want: string }[] = [
    { reason: 'a DNS name is kept as it is', name: 'svc-000001.v2_x', want: 'svc-000001.v2_x' },
    { reason: 'the empty name is a lone "%", which no non-empty name produces', name: '', want: '%' },
    { reason: '"." would name the directory itself', name: '.', want: '%2E' },
    { reason: '".." would climb out of the directory', name: '..', want: '%2E%2E' },
    { reason: 'three dots are an ordinary file name', name: '...', want: '...' },
    { reason: 'a slash stays inside the segment', name: 'a/b', want: 'a%2Fb' },
    { reason: 'a backslash stays inside the segment', name: 'a\\b', want: 'a%5Cb' },
    { reason: 'a literal "%" is escaped, so escapes never collide with names', name: '%2E', want: '%252E' },
    { reason: 'spaces, quotes, "*" and ">" are escaped', name: `a b"c'*>`, want: 'a%20b%22c%27%2A%3E' },
    { reason: 'unicode is escaped byte by byte in UTF-8, upper-case hex', name: 'é😀', want: '%C3%A9%F0%9F%98%80' },
    { reason: 'NUL is escaped, never passed to the filesystem', name: 'a\0', want: 'a%00' },
  ]
  for (const c of cases) test(c.reason, () => assert.equal(escapePathSegment(c.name), c.want))
})

describe('escapeSubjectToken', () => {
  const cases: { reason: string; name: string; want: string }[] = [
    { reason: 'a DNS label is kept as it is', name: 'team-a_1', want: 'team-a_1' },
    { reason: 'the empty name is a lone "%"', name: '', want: '%' },
    { reason: 'a dot would split the token in two', name: 'prod.eu', want: 'prod%2Eeu' },
    { reason: 'the wildcards "*" and ">" are escaped', name: '*>', want: '%2A%3E' },
    { reason: 'whitespace is escaped', name: 'a b\tc', want: 'a%20b%09c' },
    { reason: 'a literal "%" is escaped', name: '%', want: '%25' },
    { reason: 'a slash is escaped (unlike KV keys, subjects allow it, but tokens stay [A-Za-z0-9_%-])', name: 'a/b', want: 'a%2Fb' },
    { reason: 'unicode is escaped in UTF-8', name: 'ü', want: '%C3%BC' },
  ]
  for (const c of cases) test(c.reason, () => assert.equal(escapeSubjectToken(c.name), c.want))
})

describe('quoteIdent', () => {
  const cases: { reason: string; name: string; want: string }[] = [
    { reason: 'a plain name is quoted', name: 'kollect_items', want: '"kollect_items"' },
    { reason: 'an embedded quote is doubled', name: 'a"b', want: '"a""b"' },
    { reason: 'a would-be injection stays one identifier', name: 'x"; DROP TABLE t; --', want: '"x""; DROP TABLE t; --"' },
    { reason: 'case and unicode are kept (quoted identifiers are case-sensitive)', name: 'Ünicode', want: '"Ünicode"' },
  ]
  for (const c of cases) test(c.reason, () => assert.equal(quoteIdent(c.name), c.want))

  test('the empty name and NUL are refused', () => {
    assert.throws(() => quoteIdent(''), /invalid SQL identifier/)
    assert.throws(() => quoteIdent('a\0b'), /invalid SQL identifier/)
  })
})

describe('renderPath', () => {
  const ok: { reason: string; template: string; values?: Partial<typeof VALUES>; want: string }[] = [
    { reason: 'every placeholder is filled', template: 'inventory/{cluster}/{namespace}/{name}.json', want: 'inventory/lab-west/team-a/prod.json' },
    { reason: 'a placeholder may repeat', template: '{name}/{name}.yaml', want: 'prod/prod.yaml' },
    { reason: 'a value with "/" stays one segment', template: '{cluster}/{name}.json', values: { cluster: 'a/b' }, want: 'a%2Fb/prod.json' },
    { reason: 'a value ".." cannot climb', template: '{namespace}/{name}.json', values: { namespace: '..' }, want: '%2E%2E/prod.json' },
    { reason: 'a value that looks like a placeholder is data', template: '{name}.json', values: { name: '{cluster}' }, want: '%7Bcluster%7D.json' },
    { reason: 'a leading "./" is allowed', template: './{name}.json', want: 'prod.json' },
  ]
  for (const c of ok) {
    test(c.reason, () => {
      assert.equal(renderPath(ROOT, c.template, { ...VALUES, ...c.values }), path.join(ROOT, ...c.want.split('/')))
    })
  }

  const refused: { reason: string; template: string; error: RegExp }[] = [
    { reason: 'an unknown placeholder', template: '{cluster}/{team}.json', error: /unknown placeholder in path template "\{cluster\}\/\{team\}\.json"/ },
    { reason: 'an absolute template', template: '/etc/{name}', error: /must be relative/ },
    { reason: 'a ".." segment in the template', template: 'a/../../{name}.json', error: /must not contain "\.\."/ },
    { reason: 'a ".." segment written with a backslash', template: 'a\\..\\{name}.json', error: /must not contain "\.\."/ },
    { reason: 'NUL in the template', template: '{name}\0.json', error: /contains NUL/ },
    { reason: 'a line break in the template', template: 'inventory\n{name}.json', error: /contains a control character/ },
    { reason: 'a tab in the template', template: 'inventory/\t{name}.json', error: /contains a control character/ },
  ]
  for (const c of refused) test(`refuses ${c.reason}`, () => assert.throws(() => renderPath(ROOT, c.template, VALUES), c.error))
})

describe('resolveInside', () => {
  test('joins below root, and accepts root itself', () => {
    assert.equal(resolveInside(ROOT, 'a/b'), path.join(ROOT, 'a', 'b'))
    assert.equal(resolveInside(ROOT, '.'), ROOT)
  })

  test('refuses a path that leaves root, even one sharing its prefix', () => {
    assert.throws(() => resolveInside(ROOT, '../x'), /escapes its root/)
    assert.throws(() => resolveInside(ROOT, '../kollect-other/x'), /escapes its root/)
    assert.throws(() => resolveInside(ROOT, '/etc/passwd'), /escapes its root/)
  })
})
