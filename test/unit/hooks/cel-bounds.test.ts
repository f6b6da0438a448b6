import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { compileCel } from '../../../hooks/cel.js'
import { extractObject } from '../../../hooks/extract.js'
import { DEFAULT_LIMITS, ResourceLimitError, type ExpressionLimits } from '../../../hooks/limits.js'
import { compileProfile } from '../../../hooks/profile.js'
import { deployment } from '../../support/metacontroller.js'
import { doubling } from '../../security/support.js'
import { wire } from './fixtures.js'

// Runtime size bounds on CEL values. cel-js has none of its own, and a V8 "invalid size" abort
// or heap exhaustion cannot be caught: these bounds stop the common paths as a thrown error.

const DEPLOY = wire(deployment(7))

function limits(overrides: Partial<ExpressionLimits>): ExpressionLimits {
  return { ...DEFAULT_LIMITS, ...overrides }
}

/** The value, or the bound's message when a ResourceLimitError was thrown (any other error fails). */
function evaluate(expression: string, lim: ExpressionLimits = DEFAULT_LIMITS): unknown {
  const compiled = compileCel(expression, lim)
  if (!compiled.ok) throw new Error(`does not compile: ${compiled.error.message}`)
  try {
    return compiled.program({ object: DEPLOY })
  } catch (err) {
    if (err instanceof ResourceLimitError) return { limit: err.message }
    throw err
  }
}

describe('CEL runtime bounds', () => {
  const cases: { reason: string; expression: string; limits?: ExpressionLimits; want: unknown }[] = [
    {
      reason: 'a string doubled 26 times by nested cel.bind stops one step past the limit, before split() sees it',
      expression: doubling(26, "'ab'", (s) => `${s}.split('')`),
      want: { limit: 'a CEL string at position 529 has 8388608 characters; the limit is 4194304' },
    },
    {
      reason: 'a list doubled 26 times stops one step past the limit',
      expression: doubling(26, '[1, 2]', (s) => `size(${s})`),
      want: { limit: 'a CEL list at position 481 has 2097152 elements; the limit is 1048576' },
    },
    {
      reason: 'values up to the limit pass',
      expression: "'ab' + 'cd'",
      limits: limits({ maxStringLength: 4 }),
      want: 'abcd',
    },
    {
      reason: 'a string read from the object is bounded too (split() never gets a longer receiver)',
      expression: 'object.metadata.name',
      limits: limits({ maxStringLength: 4 }),
      want: { limit: 'a CEL string at position 16 has 9 characters; the limit is 4' },
    },
    {
      reason: 'a list read from the object is bounded',
      expression: 'size(object.spec.template.spec.containers)',
      limits: limits({ maxListLength: 1 }),
      want: { limit: 'a CEL list at position 31 has 2 elements; the limit is 1' },
    },
    {
      reason: 'split() output past the list limit',
      expression: "'a,b,c'.split(',')",
      limits: limits({ maxListLength: 2 }),
      want: { limit: 'a CEL list at position 0 has 3 elements; the limit is 2' },
    },
    {
      reason: 'map() output past the list limit, over the keys of a map literal',
      expression: "{'a': 1, 'b': 2, 'c': 3}.map(k, k)",
      limits: limits({ maxListLength: 2 }),
      want: { limit: 'a CEL list at position 0 has 3 elements; the limit is 2' },
    },
    {
      reason: 'join() output past the string limit',
      expression: "['aaa', 'bbb'].join('')",
      limits: limits({ maxStringLength: 5 }),
      want: { limit: 'a CEL string at position 0 has 6 characters; the limit is 5' },
    },
    {
      reason: 'bytes concatenation past the limit',
      expression: "b'abc' + b'abc'",
      limits: limits({ maxStringLength: 5 }),
      want: { limit: 'CEL bytes at position 0 have 6 bytes; the limit is 5' },
    },
    {
      reason: 'an ordinary profile expression is unchanged under the default bounds',
      expression: 'object.spec.template.spec.containers.map(c, c.image)',
      want: ['registry.example.com/payments/web-00007:1.7.0', 'registry.example.com/sidecars/envoy:1.29.1'],
    },
    {
      reason: 'has() and optionals still work on bounded nodes',
      expression: "has(object.spec.replicas) && object.metadata.?labels.team.orValue('none') == 'payments'",
      want: true,
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      assert.deepStrictEqual(evaluate(c.expression, c.limits), c.want)
    })
  }

  test('programs are cached per bounds: the same text under a lower bound is bounded', () => {
    assert.equal(evaluate("'abc' + 'def'"), 'abcdef')
    assert.deepStrictEqual(evaluate("'abc' + 'def'", limits({ maxStringLength: 5 })), { limit: 'a CEL string at position 0 has 6 characters; the limit is 5' })
  })
})

describe('attribute values before serialisation', () => {
  const extract = (attributes: { name: string; cel: string }[], lim: ExpressionLimits = DEFAULT_LIMITS) => {
    const profile = compileProfile({ attributes }, lim)
    assert.deepStrictEqual(profile.problems, [])
    try {
      return extractObject(DEPLOY, profile, lim.maxItemBytes)
    } catch (err) {
      if (err instanceof ResourceLimitError) return { limit: err.message }
      throw err
    }
  }

  test('lists nested 28 deep that share one value (2^28 leaves once serialised) stop the whole sync, not one object', () => {
    // Each level is a 2-element list: small in memory, 2^28 strings in JSON.
    const cel = doubling(28, "['x', 'y']", (s) => s, (v) => `[${v}, ${v}]`)
    assert.deepStrictEqual(extract([{ name: 'tree', cel }]), { limit: 'attribute tree: the attribute values of one object have more than 4194304 elements and characters' })
  })

  test('the budget is shared by the attributes of one object', () => {
    const lim = limits({ maxStringLength: 20 })
    assert.deepStrictEqual(extract([{ name: 'a', cel: "'0123456789'" }], lim), { attributes: { a: '0123456789' }, errors: [], bytes: 18, json: '{"a":"0123456789"}' })
    assert.deepStrictEqual(extract([{ name: 'a', cel: "'0123456789'" }, { name: 'b', cel: "'0123456789'" }], lim), {
      limit: 'attribute b: the attribute values of one object have more than 20 elements and characters',
    })
  })

  test('a bound hit while evaluating names the attribute', () => {
    assert.deepStrictEqual(extract([{ name: 'name', cel: 'object.metadata.name' }], limits({ maxStringLength: 4 })), {
      limit: 'attribute name: a CEL string at position 16 has 9 characters; the limit is 4',
    })
  })
})
