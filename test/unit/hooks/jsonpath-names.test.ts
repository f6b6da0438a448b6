import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { JSONPath } from 'jsonpath-plus'
import { compileJsonPath, MISSING } from '../../../hooks/jsonpath.js'

// Plain-names paths skip jsonpath-plus (hooks/jsonpath.ts): each must give what the library
// gives, on every shape a step can meet (missing keys, null, falsy values, primitives, arrays,
// inherited names, a "__proto__" key from JSON).
const documents: unknown[] = [
  { spec: { replicas: 3 }, metadata: { name: 'a', labels: { app: 'x' } } },
  { spec: { replicas: 0 }, metadata: { name: '', labels: {} } },
  { spec: { replicas: null }, metadata: null },
  { spec: { replicas: false, template: { spec: { containers: [{ image: 'i' }] } } } },
  { spec: 'text', metadata: { name: 'abc' } },
  { spec: [1, 2], metadata: { name: 7 } },
  { spec: {} },
  {},
  JSON.parse('{"__proto__": {"polluted": 1}, "spec": {"constructor": 1, "toString": "own"}}'),
]
const paths = [
  '$.spec', '$.spec.replicas', '$.metadata.name', '$.metadata.labels', '$.metadata.labels.app', '$.metadata.name.length',
  '$.spec.length', '$.spec.template.spec.containers', '$.spec.constructor', '$.spec.toString', '$.toString', '$.hasOwnProperty',
  '$.__proto__', '$.__proto__.polluted', '$.spec.replicas.missing', '$.metadata.name.x',
]

function library(path: string, json: unknown): unknown {
  const result = JSONPath({ path, json: json as object, eval: false, wrap: true }) as unknown[]
  return result.length === 0 ? MISSING : result[0]
}

describe('JSONPath plain names', () => {
  test('every path is compiled, and gives what jsonpath-plus gives on every document', () => {
    for (const path of paths) {
      const compiled = compileJsonPath(path)
      assert.ok(compiled.ok, path)
      for (const [i, json] of documents.entries()) {
        assert.deepEqual(compiled.program(json), library(path, json), `${path} on document ${i}`)
      }
    }
  })

  test('a missing value is MISSING, a null one is null', () => {
    const compiled = compileJsonPath('$.spec.replicas')
    assert.ok(compiled.ok)
    assert.equal(compiled.program({ spec: {} }), MISSING)
    assert.equal(compiled.program({ spec: { replicas: null } }), null)
  })
})
