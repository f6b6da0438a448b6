import assert from 'node:assert/strict'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import fc from 'fast-check'
import { escapePathSegment, escapeSubjectToken, quoteIdent, renderPath } from '../../sinks/escape.js'
import { DEFAULT_GIT_PATH } from '../../sinks/git/config.js'
import { startHooksServer, type HooksServer, type RawResponse } from '../support/hooks-server.js'
import { TYPES } from '../support/metacontroller.js'
import { ROUTES, goodTargetSync, inventorySync, isInside, send } from './support.js'

// Properties over arbitrary input: the hooks never answer 5xx and always answer a JSON body
// with an error code or a status; the escaping functions keep names as data.

const RUNS = 200

// Strings that reach the edge cases: path and subject syntax, NUL, percent signs, unicode.
const nasty = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.string({ unit: fc.constantFrom('.', '/', '\\', '%', '0', '\u0000', '*', '>', ' ', '\t', '"', "'", '_', '-', 'a', 'é', '\u202E', '😀', '{', '}') }),
  fc.constantFrom('', '.', '..', '...', '/', '\\', '%', '%2E', '%00empty', '\u0000empty', '_', '-', '..\\..', '../..', '{name}', 'C:', '\u0000'),
)

function assertAnswer(res: RawResponse, what: string): void {
  assert.ok(res.status < 500, `${what}: ${res.status} ${res.text.slice(0, 300)}`)
  let body: unknown
  assert.doesNotThrow(() => { body = res.json() }, `${what}: body is not JSON: ${res.text.slice(0, 200)}`)
  assert.ok(body !== null && typeof body === 'object', `${what}: ${res.text.slice(0, 200)}`)
  const b = body as Record<string, unknown>
  if (res.status === 200) assert.ok(b['status'] !== null && typeof b['status'] === 'object', `${what}: 200 without status: ${res.text.slice(0, 200)}`)
  else {
    assert.ok(res.status >= 400, `${what}: ${res.status}`)
    assert.match(String(b['code']), /^KOLLECT_ERR_[A-Z_]+$/, `${what}: ${res.text.slice(0, 200)}`)
    assert.equal(typeof b['message'], 'string')
  }
}

describe('request parsing over arbitrary input', () => {
  let server: HooksServer
  before(async () => {
    server = await startHooksServer({ KOLLECT_SYNC_TIMEOUT_MS: '3000' })
  })
  after(async () => {
    await server.close()
  })

  const routes = fc.constantFrom(ROUTES.targetSync, ROUTES.inventorySync)

  test('arbitrary JSON values, objects and strings never get a 5xx', async () => {
    const bodies = fc.oneof(
      fc.jsonValue().map((v) => JSON.stringify(v)),
      fc.object().map((v) => JSON.stringify(v) ?? 'null'),
      fc.string(),
      fc.string({ unit: 'binary' }),
    )
    await fc.assert(fc.asyncProperty(routes, bodies, async (route, body) => {
      assertAnswer(await send(server.url, route, { body }), `${route} ${body.slice(0, 100)}`)
    }), { numRuns: RUNS })
  })

  test('a valid envelope around arbitrary parent, spec and related values never gets a 5xx', async () => {
    const json = fc.jsonValue({ maxDepth: 4 })
    const envelope = fc.record({
      metadata: fc.record({ name: fc.string({ minLength: 1 }), namespace: nasty, generation: fc.nat() }, { requiredKeys: ['name'] }),
      spec: fc.oneof(fc.dictionary(fc.constantFrom(
        'resource', 'profileRef', 'namespaces', 'labelSelector', 'matchPolicy', 'targetRefs', 'sinkRefs', 'debounce', 'maxWait', 'suspend',
        'namespaceSelector', 'targetSelector', 'x',
      ), json), fc.object()),
      related: fc.dictionary(fc.constantFrom(TYPES.profile, TYPES.scope, TYPES.target, TYPES.sink, TYPES.deployment), fc.dictionary(nasty, fc.dictionary(fc.string(), json))),
      finalizing: fc.boolean(),
    })
    await fc.assert(fc.asyncProperty(routes, envelope, async (route, e) => {
      const body = JSON.stringify({ controller: {}, parent: { apiVersion: 'kollect.dev/v1alpha1', metadata: e.metadata, spec: e.spec }, children: {}, related: e.related, finalizing: e.finalizing })
      assertAnswer(await send(server.url, route, { body }), `${route} ${body.slice(0, 300)}`)
    }), { numRuns: RUNS })
  })

  test('real requests with one value replaced anywhere never get a 5xx', async () => {
    // Walk a real request and swap one node for an arbitrary JSON value.
    const replaceAt = (value: unknown, pick: number, by: unknown): unknown => {
      let n = 0
      const visit = (v: unknown): unknown => {
        if (n++ === pick) return by
        if (Array.isArray(v)) return v.map(visit)
        if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, visit(x)]))
        return v
      }
      return visit(value)
    }
    const bases = { [ROUTES.targetSync]: goodTargetSync(), [ROUTES.inventorySync]: inventorySync() }
    await fc.assert(fc.asyncProperty(routes, fc.nat({ max: 400 }), fc.jsonValue({ maxDepth: 3 }), async (route, pick, by) => {
      const body = JSON.stringify(replaceAt(bases[route], pick, by))
      assertAnswer(await send(server.url, route, { body }), `${route} node ${pick} := ${JSON.stringify(by).slice(0, 100)}`)
    }), { numRuns: RUNS })
  })

  test('the server still answers after the properties', async () => {
    assert.equal((await send(server.url, '/healthz', { method: 'GET' })).status, 200)
    const res = await send(server.url, ROUTES.targetSync, { body: JSON.stringify(goodTargetSync()) })
    assert.equal(res.status, 200)
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined)
  })
})

describe('escapePathSegment', () => {
  test('never yields "", ".", ".." and never contains "/", "\\\\" or NUL', () => {
    fc.assert(fc.property(nasty, (name) => {
      const seg = escapePathSegment(name)
      assert.ok(seg !== '' && seg !== '.' && seg !== '..', JSON.stringify(seg))
      assert.ok(!seg.includes('/') && !seg.includes('\\') && !seg.includes('\0'), JSON.stringify(seg))
      assert.match(seg, /^[A-Za-z0-9_.%-]+$/)
    }), { numRuns: 2000 })
  })

  test('is injective: distinct names give distinct segments', () => {
    fc.assert(fc.property(nasty, nasty, (a, b) => {
      if (a !== b) assert.notEqual(escapePathSegment(a), escapePathSegment(b), `${JSON.stringify(a)} and ${JSON.stringify(b)} share a segment`)
    }), { numRuns: 5000, examples: [['.', '%2E'], ['..', '.%2E'], ['', '%00empty'], ['', '\u0000empty']] })
  })

  test('renderPath of any (cluster, namespace, name) with the default templates stays inside the root at the template\'s depth', () => {
    const root = path.resolve('/srv/kollect-data')
    const templates = ['{cluster}/{namespace}/{name}.json', '{cluster}/{namespace}/{name}.yaml', DEFAULT_GIT_PATH]
    fc.assert(fc.property(fc.constantFrom(...templates), nasty, nasty, nasty, (template, cluster, namespace, name) => {
      const full = renderPath(root, template, { cluster, namespace, name })
      assert.ok(isInside(root, full), `${JSON.stringify([cluster, namespace, name])} → ${full}`)
      assert.equal(path.dirname(path.relative(root, full)).split(path.sep).length, template.split('/').length - 1, full)
    }), { numRuns: 2000 })
  })
})

describe('escapeSubjectToken', () => {
  test('output is one token of [A-Za-z0-9_%-]: no ".", "*", ">" or whitespace', () => {
    fc.assert(fc.property(nasty, (name) => {
      assert.match(escapeSubjectToken(name), /^[A-Za-z0-9_%-]+$/, JSON.stringify(name))
    }), { numRuns: 2000 })
  })

  test('is injective: distinct names give distinct tokens', () => {
    fc.assert(fc.property(nasty, nasty, (a, b) => {
      if (a !== b) assert.notEqual(escapeSubjectToken(a), escapeSubjectToken(b), `${JSON.stringify(a)} and ${JSON.stringify(b)} share a subject token`)
    }), { numRuns: 5000, examples: [['a.b', 'a%2Eb'], ['', '_']] })
  })
})

describe('quoteIdent', () => {
  test('any non-empty string without NUL is quoted, and un-doubling the quotes gives it back', () => {
    fc.assert(fc.property(nasty.filter((s) => s !== '' && !s.includes('\0')), (name) => {
      const q = quoteIdent(name)
      assert.ok(q.length >= 2 && q.startsWith('"') && q.endsWith('"'), q)
      const inner = q.slice(1, -1)
      assert.ok(!inner.replace(/""/g, '').includes('"'), `a quote inside ${q} is not doubled`)
      assert.equal(inner.replace(/""/g, '"'), name)
    }), { numRuns: 2000 })
  })

  test('refuses the empty string and any string with NUL', () => {
    fc.assert(fc.property(fc.string(), fc.string(), (a, b) => {
      assert.throws(() => quoteIdent(`${a}\0${b}`), /invalid SQL identifier/)
    }))
    assert.throws(() => quoteIdent(''), /invalid SQL identifier/)
  })
})
