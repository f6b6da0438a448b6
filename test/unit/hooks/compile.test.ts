import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { AttributeSpec } from '../../../api/types.js'
import { compileCel, type CelCompiled, type CompileError } from '../../../hooks/cel.js'
import { compileJsonPath, type JsonPathCompiled } from '../../../hooks/jsonpath.js'
import { DEFAULT_LIMITS, type ExpressionLimits } from '../../../hooks/limits.js'
import { compileProfile, describeProblem, type AttributeProblem } from '../../../hooks/profile.js'
import { enableLinearRegExps } from '../../../server/process/regexp-engine.js'

// matches() patterns need the engine the process entry points switch on.
enableLinearRegExps()

/** A compile result as data: a compiled program is reduced to "ok", an error is kept whole. */
function outcome(result: CelCompiled | JsonPathCompiled): 'ok' | CompileError {
  return result.ok ? 'ok' : result.error
}

function limits(overrides: Partial<ExpressionLimits>): ExpressionLimits {
  return { ...DEFAULT_LIMITS, ...overrides }
}

describe('compileCel', () => {
  const cases: { reason: string; expression: string; limits?: ExpressionLimits; want: 'ok' | CompileError }[] = [
    {
      reason: 'a well-formed expression compiles',
      expression: 'object.spec.template.spec.containers.map(c, c.image)',
      want: 'ok',
    },
    {
      reason: 'a trailing dot is a syntax error at the end of the text',
      expression: 'object.metadata.',
      want: { message: 'Expected IDENTIFIER, got EOF', position: 16 },
    },
    {
      reason: 'a dangling operator is a syntax error with its position',
      expression: '1 +',
      want: { message: 'Unexpected token: EOF', position: 3 },
    },
    {
      reason: 'an empty expression is refused before parsing',
      expression: '   ',
      want: { message: 'expression is empty' },
    },
    {
      reason: 'an expression one character over the length limit is refused',
      expression: `'${'a'.repeat(4095)}'`,
      want: { message: 'expression is 4097 characters; the limit is 4096' },
    },
    {
      reason: 'an expression exactly at the length limit compiles',
      expression: `'${'a'.repeat(4094)}'`,
      want: 'ok',
    },
    {
      reason: 'a lower length limit applies even when the text was compiled before under the default',
      expression: "object.metadata.name == 'web-00001'",
      limits: limits({ maxExpressionLength: 10 }),
      want: { message: 'expression is 35 characters; the limit is 10' },
    },
    {
      reason: 'two nested macros are within the default depth of 2',
      expression: 'object.spec.template.spec.containers.map(c, c.ports.map(p, p.containerPort))',
      want: 'ok',
    },
    {
      reason: 'three nested macros exceed the default depth of 2, reported at the innermost macro',
      expression: 'object.a.map(x, x.b.map(y, y.c.map(z, z)))',
      want: { message: 'comprehension macros nest 3 deep; the limit is 2', position: 27 },
    },
    {
      reason: 'nesting through all/exists counts the same as map',
      expression: 'object.a.all(x, x.b.exists(y, y.c.filter(z, z > 1).size() > 0))',
      want: { message: 'comprehension macros nest 3 deep; the limit is 2', position: 30 },
    },
    {
      reason: 'maxMacroDepth 3 accepts three nested macros',
      expression: 'object.a.map(x, x.b.map(y, y.c.map(z, z)))',
      limits: limits({ maxMacroDepth: 3 }),
      want: 'ok',
    },
    {
      reason: 'chained macros run one after another, not inside each other, so three in a chain are not nesting',
      expression: "object.spec.template.spec.containers.filter(c, c.name != 'envoy').map(c, c.image).filter(i, i != '')",
      want: 'ok',
    },
    {
      reason: 'a literal linear-time pattern is accepted',
      expression: "object.metadata.name.matches('^web-[0-9]+$')",
      want: 'ok',
    },
    {
      reason: 'a backreference cannot run in linear time and is refused at compile time, at the pattern',
      expression: "'aaa'.matches('(a)\\\\1')",
      want: { message: 'pattern "(a)\\\\1" is not allowed: /(a)\\1/l: Cannot be executed in linear time', position: 14 },
    },
    {
      reason: 'a lookahead cannot run in linear time and is refused',
      expression: "object.metadata.name.matches('web(?=-)')",
      want: { message: 'pattern "web(?=-)" is not allowed: /web(?=-)/l: Cannot be executed in linear time', position: 29 },
    },
    {
      reason: 'a pattern computed from the object cannot be checked, so it is refused',
      expression: 'object.metadata.name.matches(object.metadata.labels.app)',
      want: { message: 'matches() needs a string literal pattern, so it can be checked before it runs', position: 0 },
    },
    {
      reason: 'the global form matches(s, p) is checked the same way',
      expression: 'matches(object.metadata.name, object.metadata.labels.app)',
      want: { message: 'matches() needs a string literal pattern, so it can be checked before it runs', position: 0 },
    },
  ]
  compileCel("object.metadata.name == 'web-00001'") // cached under the default limits first
  for (const c of cases) {
    test(c.reason, () => {
      assert.deepStrictEqual(outcome(compileCel(c.expression, c.limits)), c.want)
    })
  }

  test('the cache returns the identical result object for the same text, and a fresh one for other text', () => {
    const a = compileCel('object.metadata.namespace')
    const b = compileCel('object.metadata.namespace')
    const other = compileCel('object.metadata.name')
    assert.equal(a, b)
    assert.notEqual(a, other)
    const e1 = compileCel('object.metadata.')
    const e2 = compileCel('object.metadata.')
    assert.equal(e1, e2, 'errors are cached too')
  })

  test('matches() with a catastrophic pattern evaluates on a 50k-character string in under a second', () => {
    const compiled = compileCel("object.s.matches('(a+)+$')")
    assert.equal(compiled.ok, true)
    if (!compiled.ok) return
    const hostile = 'a'.repeat(50_000) + 'b'
    const started = performance.now()
    const result = compiled.program({ object: { s: hostile } })
    const elapsed = performance.now() - started
    assert.equal(result, false)
    assert.ok(elapsed < 1000, `took ${elapsed.toFixed(0)} ms`)
    assert.equal(compiled.program({ object: { s: 'aaaa' } }), true, 'and it still matches what it should')
  })
})

describe('compileJsonPath', () => {
  const cases: { reason: string; path: string; limits?: ExpressionLimits; want: 'ok' | CompileError }[] = [
    { reason: 'a dotted path compiles', path: '$.spec.replicas', want: 'ok' },
    { reason: 'wildcards, slices and recursive descent compile', path: '$..containers[*].ports[0:2].containerPort', want: 'ok' },
    { reason: 'a path must start at the root', path: 'spec.replicas', want: { message: 'a JSONPath starts with "$"', position: 0 } },
    { reason: 'an empty path is refused', path: '', want: { message: 'path is empty' } },
    {
      reason: 'a filter expression is refused at the "?"',
      path: '$.spec.containers[?(@.name == "app")]',
      want: { message: 'filter expressions "?()" are not supported; use a CEL attribute', position: 18 },
    },
    {
      reason: 'a filter with a space before the parenthesis is still a filter',
      path: '$.a[? (1)]',
      want: { message: 'filter expressions "?()" are not supported; use a CEL attribute', position: 4 },
    },
    {
      reason: 'a script expression is refused at the "("',
      path: '$.spec.containers[(@.length-1)]',
      want: { message: 'script expressions "()" are not supported; use a CEL attribute', position: 18 },
    },
    { reason: 'an @ reference is refused', path: '$.spec.@type', want: { message: '"@" references are not supported; use a CEL attribute', position: 7 } },
    { reason: 'a backtick is refused', path: '$.spec.`replicas', want: { message: 'backticks are not supported', position: 7 } },
    { reason: 'an unclosed bracket is refused at the end', path: '$.spec.containers[0', want: { message: 'unbalanced brackets or quotes', position: 19 } },
    { reason: 'a stray closing bracket is refused where it stands', path: '$.spec]', want: { message: 'unbalanced brackets or quotes', position: 6 } },
    { reason: 'an unclosed quote is refused at the end', path: "$.metadata.labels['app", want: { message: 'unbalanced brackets or quotes', position: 22 } },
    { reason: 'brackets inside quotes do not count', path: "$.metadata.labels['a]b']", want: 'ok' },
    {
      reason: 'a path over the length limit is refused',
      path: '$.' + 'a'.repeat(4095),
      want: { message: 'path is 4097 characters; the limit is 4096' },
    },
    {
      reason: 'a lower length limit applies even when the path was compiled before under the default',
      path: '$.metadata.annotations.owner',
      limits: limits({ maxExpressionLength: 10 }),
      want: { message: 'path is 28 characters; the limit is 10' },
    },
  ]
  compileJsonPath('$.metadata.annotations.owner') // cached under the default limits first
  for (const c of cases) {
    test(c.reason, () => {
      assert.deepStrictEqual(outcome(compileJsonPath(c.path, c.limits)), c.want)
    })
  }

  test('a published script payload is refused and does not run', () => {
    const g = globalThis as Record<string, unknown>
    delete g['kollectPwned']
    const payloads = [
      "$..[?(@.constructor.constructor('return process')().exit())]",
      "$..[?(@.constructor.constructor('globalThis.kollectPwned = 1')())]",
      "$[(this.constructor.constructor('globalThis.kollectPwned = 1')())]",
    ]
    const results = payloads.map((p) => compileJsonPath(p))
    assert.deepStrictEqual(results.map(outcome), [
      { message: 'filter expressions "?()" are not supported; use a CEL attribute', position: 4 },
      { message: 'filter expressions "?()" are not supported; use a CEL attribute', position: 4 },
      { message: 'script expressions "()" are not supported; use a CEL attribute', position: 2 },
    ])
    assert.equal(g['kollectPwned'], undefined)
  })

  test('prototype members are not reachable through a path', () => {
    const compiled = compileJsonPath('$.constructor')
    assert.equal(compiled.ok, true)
    if (!compiled.ok) return
    const object = { metadata: { name: 'a' } }
    const missing = ['$.constructor', '$.__proto__', "$['__proto__']", '$.metadata.toString'].map((p) => {
      const c = compileJsonPath(p)
      return c.ok ? typeof c.program(object) : 'refused'
    })
    assert.deepStrictEqual(missing, ['symbol', 'symbol', 'symbol', 'symbol'], 'each is MISSING')
  })
})

describe('compileProfile', () => {
  function problems(attributes: AttributeSpec[], lim?: ExpressionLimits): { problems: AttributeProblem[]; compiled: string[] } {
    const p = compileProfile({ attributes }, lim)
    return { problems: p.problems, compiled: p.attributes.map((a) => a.name) }
  }
  const cases: { reason: string; attributes: AttributeSpec[]; limits?: ExpressionLimits; want: { problems: AttributeProblem[]; compiled: string[] } }[] = [
    {
      reason: 'a valid profile compiles every attribute and has no problems',
      attributes: [{ name: 'images', cel: 'object.spec.template.spec.containers.map(c, c.image)' }, { name: '_replicas2', jsonPath: '$.spec.replicas' }],
      want: { problems: [], compiled: ['images', '_replicas2'] },
    },
    {
      reason: 'a duplicate name is a problem on the second occurrence only',
      attributes: [{ name: 'a', cel: '1' }, { name: 'a', cel: '2' }],
      want: { problems: [{ index: 1, name: 'a', field: 'name', error: { message: 'duplicate attribute name "a"' } }], compiled: ['a'] },
    },
    {
      reason: 'names must be identifiers: no leading digit, no dash',
      attributes: [{ name: '1bad', cel: '1' }, { name: 'a-b', cel: '1' }, { name: '', cel: '1' }],
      want: {
        problems: [
          { index: 0, name: '1bad', field: 'name', error: { message: 'name "1bad" must match ^[A-Za-z_][A-Za-z0-9_]*$' } },
          { index: 1, name: 'a-b', field: 'name', error: { message: 'name "a-b" must match ^[A-Za-z_][A-Za-z0-9_]*$' } },
          { index: 2, name: '', field: 'name', error: { message: 'name "" must match ^[A-Za-z_][A-Za-z0-9_]*$' } },
        ],
        compiled: [],
      },
    },
    {
      reason: 'both cel and jsonPath is a problem reported on cel',
      attributes: [{ name: 'both', cel: '1', jsonPath: '$.a' }],
      want: { problems: [{ index: 0, name: 'both', field: 'cel', error: { message: 'exactly one of cel or jsonPath must be set' } }], compiled: [] },
    },
    {
      reason: 'neither cel nor jsonPath is a problem reported on the attribute',
      attributes: [{ name: 'neither' }],
      want: { problems: [{ index: 0, name: 'neither', field: 'name', error: { message: 'exactly one of cel or jsonPath must be set' } }], compiled: [] },
    },
    {
      reason: 'expression errors keep their position and the other attributes still compile',
      attributes: [{ name: 'ok', cel: '1' }, { name: 'bad', cel: '1 +' }, { name: 'path', jsonPath: '$.a[?(@.b)]' }],
      want: {
        problems: [
          { index: 1, name: 'bad', field: 'cel', error: { message: 'Unexpected token: EOF', position: 3 } },
          { index: 2, name: 'path', field: 'jsonPath', error: { message: 'filter expressions "?()" are not supported; use a CEL attribute', position: 4 } },
        ],
        compiled: ['ok'],
      },
    },
    {
      reason: 'too many attributes is one problem, and only the first maxAttributes compile',
      attributes: [{ name: 'a', cel: '1' }, { name: 'b', cel: '2' }, { name: 'c', cel: '3' }],
      limits: limits({ maxAttributes: 2 }),
      want: { problems: [{ index: 2, name: '', field: 'attributes', error: { message: 'profile has 3 attributes; the limit is 2' } }], compiled: ['a', 'b'] },
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      assert.deepStrictEqual(problems(c.attributes, c.limits), c.want)
    })
  }

  test('the default limit on attributes is 128', () => {
    const attributes = Array.from({ length: 129 }, (_, i) => ({ name: `a${i}`, cel: String(i) }))
    assert.deepStrictEqual(problems(attributes).problems, [
      { index: 128, name: '', field: 'attributes', error: { message: 'profile has 129 attributes; the limit is 128' } },
    ])
    assert.deepStrictEqual(problems(attributes.slice(0, 128)).problems, [])
  })
})

describe('describeProblem', () => {
  const cases: { reason: string; problem: AttributeProblem; want: string }[] = [
    {
      reason: 'an expression error names the field, the attribute, the message and the position',
      problem: { index: 2, name: 'replicas', field: 'cel', error: { message: 'Unexpected token: EOF', position: 7 } },
      want: 'spec.attributes[2].cel (replicas): Unexpected token: EOF at position 7',
    },
    {
      reason: 'a JSONPath error at position 0 still shows the position',
      problem: { index: 0, name: 'p', field: 'jsonPath', error: { message: 'a JSONPath starts with "$"', position: 0 } },
      want: 'spec.attributes[0].jsonPath (p): a JSONPath starts with "$" at position 0',
    },
    {
      reason: 'an error without a position has no position suffix',
      problem: { index: 1, name: 'a', field: 'name', error: { message: 'duplicate attribute name "a"' } },
      want: 'spec.attributes[1].name (a): duplicate attribute name "a"',
    },
    {
      reason: 'a nameless problem has no label, and the whole-list problem points at spec.attributes',
      problem: { index: 128, name: '', field: 'attributes', error: { message: 'profile has 129 attributes; the limit is 128' } },
      want: 'spec.attributes: profile has 129 attributes; the limit is 128',
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      assert.equal(describeProblem(c.problem), c.want)
    })
  }
})
