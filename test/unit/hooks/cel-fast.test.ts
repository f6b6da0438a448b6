import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { Environment, Optional } from '@marcbachmann/cel-js'
import { BAIL, compileFast } from '../../../hooks/cel-fast.js'
import { compileCel, type CelProgram } from '../../../hooks/cel.js'
import { extractObject } from '../../../hooks/extract.js'
import { DEFAULT_LIMITS } from '../../../hooks/limits.js'
import { deployment, loadExampleCr } from '../../support/metacontroller.js'
import { profileOf, wire } from './fixtures.js'

// The CEL fast path (hooks/cel-fast.ts) answers only where its answer is cel-js's: on every
// document below, each expression either gives exactly what cel-js gives or hands over (BAIL),
// and where cel-js throws it always hands over, so cel-js's error and position are the ones shown.
// cel-js runs as hooks/cel.ts runs it (with its runtime bounds, and maps with a "constructor" key
// handed over as Maps): dyn() keeps an expression off the fast path and changes nothing else.
const env = new Environment({ enableOptionalTypes: true, homogeneousAggregateLiterals: false }).registerVariable('object', 'dyn')

const documents: unknown[] = [
  wire(deployment(1)),
  wire(deployment(2, { managedFields: false })),
  { spec: { replicas: 3, template: { spec: { containers: [{ image: 'i' }, { image: 'ü🙂' }] } } }, metadata: { name: 'tmp-a', labels: { team: 't' } }, status: { readyReplicas: 3 } },
  { spec: { replicas: 0 }, metadata: { name: '', labels: {} }, status: {} },
  { spec: { replicas: null, template: { spec: { containers: [] } } }, metadata: null, status: null },
  { spec: { replicas: 1.5, template: { spec: { containers: [{ image: 7 }, { noImage: true }] } } }, metadata: { name: 7, labels: { team: null } } },
  { spec: { replicas: 2 ** 53 + 2, template: { spec: { containers: { a: { image: 'x' } } } } }, metadata: { name: ['x'], labels: 'text' }, status: { readyReplicas: '3' } },
  { spec: 'text', metadata: { name: 'tmp-🙂', labels: { team: '' } }, status: { readyReplicas: true } },
  { spec: [1, 2], metadata: {} },
  { spec: { replicas: 2, template: { spec: { containers: [{ image: 'a' }, null, 'b', [1]] } } }, status: { readyReplicas: 2.0 } },
  {},
  JSON.parse('{"metadata": {"name": "n", "labels": {"__proto__": "x", "team": "p"}}, "spec": {"replicas": 1}}'),
  JSON.parse('{"__proto__": {"team": 1}, "metadata": {"constructor": 1, "toString": "own", "labels": {"__proto__": "x", "team": "p"}}, "spec": {"replicas": -0}}'),
]

const subset = [
  'object.spec.template.spec.containers.map(c, c.image)',
  'size(object.spec.template.spec.containers)',
  'object.spec.template.spec.containers.size()',
  'size(object.metadata.labels)',
  'object.metadata.?labels.team.orValue("unknown")',
  'object.metadata.?labels.?team.orValue(1)',
  'object.?spec.replicas',
  'object.?status.readyReplicas.orValue(0) == object.spec.replicas',
  '(has(object.status) && has(object.status.readyReplicas) ? object.status.readyReplicas : 0) == (has(object.spec.replicas) ? object.spec.replicas : 1)',
  "!object.metadata.name.startsWith('tmp-')",
  "object.metadata.name.endsWith('a') || object.metadata.name.contains('🙂')",
  'object.spec.replicas == 3',
  'object.spec.replicas != 1',
  "object.metadata.name == 'tmp-a'",
  'has(object.metadata.toString) && has(object.metadata.constructor)',
  'object.metadata.toString',
  'object.metadata.constructor',
  'object.metadata.labels.team',
  'object.spec.template.spec.containers.map(c, c.map(d, d))',
  'object.spec.template.spec.containers.map(object, object.image)',
  'object.status.readyReplicas == object.spec.replicas ? object.metadata.name : object.metadata.labels',
]

// Built by cel-js alone: the fast path has no answer for these and must not pretend to.
const outside = [
  'object.spec.replicas + 1', "object.metadata.name.matches('^a')", 'object.spec.template.spec.containers.filter(c, c.image != "")',
  'object.spec.replicas == 1.0', "size(object.metadata.name) > 0", 'object.metadata["name"]',
]

function celJsOnly(expression: string): CelProgram {
  const compiled = compileCel(`dyn(${expression})`)
  assert.ok(compiled.ok, expression)
  return compiled.program
}

function celJs(expression: string, object: unknown): { value: unknown } | { error: string } {
  try {
    return { value: celJsOnly(expression)({ object }) }
  } catch (err) {
    return { error: (err as Error).message }
  }
}

function same(fast: unknown, slow: unknown): boolean {
  if (fast instanceof Optional || slow instanceof Optional) {
    return fast instanceof Optional && slow instanceof Optional && fast.hasValue() === slow.hasValue() && (!fast.hasValue() || same(fast.value(), slow.value()))
  }
  try {
    assert.deepStrictEqual(fast, withoutMaps(slow))
    return true
  } catch {
    return false
  }
}

/** cel-js's Maps (maps with a "constructor" key) as the plain maps the fast path reads. */
function withoutMaps(value: unknown): unknown {
  if (value instanceof Map) return Object.fromEntries([...value].map(([k, v]) => [k, withoutMaps(v)]))
  if (Array.isArray(value)) return value.map(withoutMaps)
  return value
}

describe('CEL fast path', () => {
  test('every expression of the subset compiles to a fast program that gives what cel-js gives, or hands over', () => {
    let answered = 0
    for (const expression of subset) {
      const fast = compileFast(env.parse(expression).ast, DEFAULT_LIMITS)
      assert.ok(fast, `${expression} is in the subset`)
      for (const [i, object] of documents.entries()) {
        const got = fast(object)
        const want = celJs(expression, object)
        if (got === BAIL) continue
        answered++
        assert.ok('value' in want, `${expression} on document ${i}: cel-js throws (${'error' in want ? want.error : ''}), the fast path answered`)
        assert.ok(same(got, want.value), `${expression} on document ${i}: ${String(got)} against cel-js ${String(want.value)}`)
      }
    }
    // Most pairs are plain enough to be answered: the fast path is in use, not always handing over.
    assert.ok(answered > (subset.length * documents.length) / 3, `answered ${answered}`)
  })

  test('expressions outside the subset have no fast program', () => {
    for (const expression of outside) assert.equal(compileFast(env.parse(expression).ast, DEFAULT_LIMITS), null, expression)
  })

  test('the example profile and matchPolicy never hand over on a realistic Deployment', () => {
    const profile = loadExampleCr('profile-deployments.yaml') as unknown as { spec: { attributes: { cel?: string }[] } }
    const target = loadExampleCr('target-deployments.yaml') as unknown as { spec: { matchPolicy: string } }
    const expressions = [...profile.spec.attributes.flatMap((a) => (a.cel ? [a.cel] : [])), target.spec.matchPolicy]
    assert.equal(expressions.length, 5)
    for (const expression of expressions) {
      const fast = compileFast(env.parse(expression).ast, DEFAULT_LIMITS)
      assert.ok(fast, expression)
      assert.notEqual(fast(wire(deployment(3))), BAIL, expression)
    }
  })

  test('values past the runtime bounds hand over, so cel-js raises the ResourceLimit', () => {
    const limits = { ...DEFAULT_LIMITS, maxStringLength: 8, maxListLength: 2 }
    const object = { metadata: { name: 'x'.repeat(9) }, spec: { list: [1, 2, 3] } }
    assert.equal(compileFast(env.parse('object.metadata.name').ast, limits)?.(object), BAIL)
    assert.equal(compileFast(env.parse('size(object.spec.list)').ast, limits)?.(object), BAIL)
    const compiled = compileCel('object.metadata.name', limits)
    assert.ok(compiled.ok)
    assert.throws(() => compiled.program({ object }), /a CEL string at position \d+ has 9 characters/)
  })

  test('extraction gives the same items and errors through the fast path as through cel-js alone', () => {
    const attributes = [
      { name: 'images', cel: 'object.spec.template.spec.containers.map(c, c.image)' },
      { name: 'count', cel: 'size(object.spec.template.spec.containers)', type: 'integer' as const },
      { name: 'team', cel: 'object.metadata.?labels.team.orValue("unknown")', optional: true },
      {
        name: 'ready',
        cel: '(has(object.status) && has(object.status.readyReplicas) ? object.status.readyReplicas : 0) == (has(object.spec.replicas) ? object.spec.replicas : 1)',
        type: 'boolean' as const,
      },
      { name: 'name', cel: 'object.metadata.name', type: 'string' as const, optional: true },
    ]
    const fast = profileOf(attributes)
    const slow = { ...fast, attributes: fast.attributes.map((a, i) => ({ ...a, evaluate: (object: unknown) => celJsOnly(attributes[i]?.cel ?? '')({ object }) })) }
    for (const [i, object] of documents.entries()) {
      assert.deepStrictEqual(extractObject(object as never, fast, DEFAULT_LIMITS.maxItemBytes), extractObject(object as never, slow, DEFAULT_LIMITS.maxItemBytes), `document ${i}`)
    }
  })
})
