import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { Environment } from '@marcbachmann/cel-js'
import { BAIL, compileFast } from '../../../hooks/cel-fast.js'
import { compileCel } from '../../../hooks/cel.js'
import { extractObject } from '../../../hooks/extract.js'
import { DEFAULT_LIMITS } from '../../../hooks/limits.js'
import { toJson } from '../../../hooks/values.js'
import type { KubeObject } from '../../../api/types.js'
import { profileOf } from './fixtures.js'

// Issue 24: cel-js types a map by its constructor property, so a map with an own key
// "constructor" (a label, an annotation, a ConfigMap's data) could not be read ("Unsupported
// type"), and under `?.` read as absent. Such keys are data like any other, on both paths.

const env = new Environment({ enableOptionalTypes: true, homogeneousAggregateLiterals: false }).registerVariable('object', 'dyn')

const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration'
const configMap = (): KubeObject => JSON.parse(JSON.stringify({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'c', namespace: 'team-a', labels: { constructor: 'x', team: 'p' }, annotations: { constructor: 'a', [LAST_APPLIED]: '{"kind":"ConfigMap","password":"p"}' } },
  data: { constructor: 'd', other: 'o' },
  spec: { list: [{ constructor: { prototype: 1 }, name: 'first' }, { name: 'second' }] },
})) as KubeObject

function evaluate(expression: string, object: unknown): unknown {
  const compiled = compileCel(expression)
  assert.ok(compiled.ok, expression)
  return toJson(compiled.program({ object }))
}

describe('CEL: a map key named "constructor" is data', () => {
  const cases: [string, unknown][] = [
    ['object.metadata.labels.constructor', 'x'],
    ['has(object.metadata.annotations.constructor)', true],
    ["object.data['constructor']", 'd'],
    ["object.metadata.?labels.constructor.orValue('none')", 'x'],
    ['object.metadata.labels', { constructor: 'x', team: 'p' }],
    ['size(object.data)', 2],
    ["'constructor' in object.data", true],
    ['object.data.filter(k, k.startsWith("c"))', ['constructor']],
    ['object.spec.list.map(i, i.name)', ['first', 'second']],
    ['object.spec.list[0].constructor.prototype', 1],
    ['object.metadata.labels.team == "p" && has(object.metadata.labels.constructor)', true],
    // Where CEL absorbs the error, cel-js alone answered as if the key were absent.
    ["object.metadata.labels.exists(k, object.metadata.labels[k] == 'x')", true],
    ["object.metadata.?annotations.constructor.hasValue()", true],
  ]
  for (const [expression, want] of cases) {
    test(`${expression} reads the key`, () => {
      assert.deepStrictEqual(evaluate(expression, configMap()), want)
    })
  }

  test('a map with the key deep under the one read is typed too', () => {
    const object = JSON.parse('{"spec": {"a": {"b": {"constructor": 1}}}}') as unknown
    assert.deepStrictEqual(evaluate('size(object.spec)', object), 1)
    assert.deepStrictEqual(evaluate('object.spec == {"a": {"b": {"c": 1}}}', object), false)
  })

  test('extraction exports such maps with their keys, and the last-applied annotation is still redacted', () => {
    const profile = profileOf([
      { name: 'labels', cel: 'object.metadata.labels' },
      { name: 'annotations', cel: 'object.metadata.annotations' },
      { name: 'dataKey', cel: 'object.data.constructor' },
    ])
    const got = extractObject(configMap(), profile, DEFAULT_LIMITS.maxItemBytes)
    assert.deepStrictEqual(got.errors, [])
    assert.deepStrictEqual(got.attributes, {
      annotations: { constructor: 'a', [LAST_APPLIED]: '{"kind":"ConfigMap","password":"[redacted]"}' },
      dataKey: 'd',
      labels: { constructor: 'x', team: 'p' },
    })
  })

  test('__proto__ keys beside a constructor key stay own keys and pollute no prototype', () => {
    const object = JSON.parse('{"metadata": {"labels": {"__proto__": {"polluted": "yes"}, "constructor": "x"}, "annotations": {"__proto__": "y", "a": {"constructor": 1}}}}') as unknown
    assert.deepStrictEqual(evaluate("object.metadata.labels['__proto__'].polluted", object), 'yes')
    assert.deepStrictEqual(evaluate("object.metadata.annotations['__proto__']", object), 'y')
    assert.deepStrictEqual(evaluate('object.metadata.annotations.a.constructor', object), 1)
    const labels = evaluate('object.metadata.labels', object) as Record<string, unknown>
    assert.ok(Object.hasOwn(labels, '__proto__') && Object.hasOwn(labels, 'constructor'))
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined)
    assert.equal(Object.getPrototypeOf(labels), Object.prototype)
  })

  test('the fast path and cel-js give the same value or the same error, on maps with and without the key', () => {
    const documents = [
      configMap(),
      JSON.parse('{"metadata": {"constructor": 1, "labels": {"constructor": "x"}}, "spec": {"template": {"spec": {"containers": [{"constructor": "c", "image": "i"}]}}}}'),
      JSON.parse('{"constructor": {"constructor": {}}, "metadata": {"labels": {"team": "p"}}}'),
      JSON.parse('{"__proto__": {"constructor": 1}, "metadata": {"labels": {"__proto__": "x", "constructor": "y"}}}'),
    ]
    const expressions = [
      'object.metadata.labels.constructor',
      'has(object.metadata.labels.constructor)',
      'object.metadata.?labels.constructor.orValue("none")',
      'object.metadata.?labels.?constructor.orValue("none")',
      'object.metadata.constructor',
      'size(object.metadata.labels)',
      'object.metadata.labels',
      'object.spec.template.spec.containers.map(c, c.image)',
      'object.spec.template.spec.containers.map(c, c.constructor)',
      'object.constructor.constructor',
      'object.metadata.labels.team == "p"',
    ]
    let answered = 0
    for (const expression of expressions) {
      const fast = compileFast(env.parse(expression).ast, DEFAULT_LIMITS)
      // dyn() is outside the fast subset: this program is cel-js alone, on the same object view.
      const slow = compileCel(`dyn(${expression})`)
      const full = compileCel(expression)
      assert.ok(fast && slow.ok && full.ok, expression)
      for (const [i, object] of documents.entries()) {
        const want = outcome(() => slow.program({ object }))
        assert.deepStrictEqual(outcome(() => full.program({ object })), want, `${expression} on document ${i}`)
        const got: unknown = fast(object)
        if (got === BAIL) continue
        answered++
        assert.deepStrictEqual(outcome(() => got), want, `${expression} on document ${i}: the fast path answered`)
      }
    }
    assert.ok(answered > 0)
  })
})

function outcome(run: () => unknown): { value: unknown } | { error: string } {
  try {
    return { value: toJson(run()) }
  } catch (err) {
    // The position differs by the dyn( in front; the message must not.
    return { error: String((err as Error).message).split('\n')[0] as string }
  }
}
