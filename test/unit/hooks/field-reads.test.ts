import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { KubeObject } from '../../../api/types.js'
import { compileCel } from '../../../hooks/cel.js'
import { celReads, expressionsRead, jsonPathReads, MANAGED_FIELDS } from '../../../hooks/field-reads.js'
import { compileJsonPath } from '../../../hooks/jsonpath.js'
import { deployment, loadExampleCr } from '../../support/metacontroller.js'
import { wire } from './fixtures.js'

// The server leaves objects' managedFields out of what extraction children parse when no
// expression of the target reads them. Each expression here that is judged not to read them must
// give the same value on an object whatever its managedFields hold; the others must be judged to
// read them, however they reach them.

const reads = (cel?: string, jsonPath?: string) => expressionsRead(MANAGED_FIELDS, [cel ? { cel } : { jsonPath }])

const celNot = [
  'object.metadata.name',
  'object.spec.template.spec.containers.map(c, c.image)',
  'object.metadata.?labels.team.orValue("unknown")',
  '(has(object.status) && has(object.status.readyReplicas) ? object.status.readyReplicas : 0) == 1',
  "!object.metadata.name.startsWith('tmp-')",
  'object.metadata.labels.exists(k, k == "managedFields")',
  'object["metadata"]["name"]',
  'object.metadata[?"uid"].orValue("")',
  'object.status.conditions.filter(c, c.type == "Available").map(c, c.status)',
  'object.spec.replicas + 1',
  '-object.spec.replicas',
  'cel.bind(m, object.metadata.labels, m.team)',
  'object.metadata.annotations["managedFields"]',
]
const celReading = [
  'object',
  'object.metadata',
  'object.metadata.managedFields',
  'has(object.metadata.managedFields)',
  'size(object.metadata.managedFields)',
  'object.metadata.managedFields[0].manager',
  'object.?metadata.?managedFields.orValue([])',
  'object["metadata"]["managedFields"]',
  'object.metadata[object.kind]',
  'object.metadata.exists(k, k == "managedFields")',
  'cel.bind(m, object.metadata, m.managedFields)',
  '[object].map(o, o.metadata.managedFields)',
  'object.spec.template.spec.containers.map(object, object.image)',
  'dyn(object).metadata.managedFields',
  '{"a": object}.a.metadata.managedFields',
  'object.(',
]
const pathNot = ['$.metadata.name', '$.spec..image', "$['metadata']['labels']", '$.spec.template.spec.containers[*].image', '$.status']
const pathReading = [
  '$', '$.metadata', '$..manager', '$.metadata.*', '$.metadata.name^', "$.metadata['managedFields']", "$['metadata'].managedFields",
  '$.*.managedFields', '$[*]', '$.metadata.*~', '$["metadata"]["name"]', '$.metadata.managedFields[0]',
]

/** The same Deployment with managedFields as the API server keeps them, with none, and with others. */
function variants(): KubeObject[] {
  const base = wire(deployment(3))
  const none = wire(deployment(3, { managedFields: false }))
  const other = wire(base)
  ;(other.metadata as { managedFields: unknown }).managedFields = [{ manager: 'other', operation: 'Apply' }, 7]
  return [base, none, other]
}

function valueOf(evaluate: () => unknown): unknown {
  try {
    return { value: evaluate() }
  } catch (err) {
    return { error: (err as Error).message }
  }
}

describe('field reads', () => {
  test('a CEL expression judged not to read managedFields gives the same value whatever they hold', () => {
    for (const expression of celNot) {
      assert.equal(reads(expression), false, expression)
      const compiled = compileCel(expression)
      assert.ok(compiled.ok, expression)
      const [a, ...rest] = variants().map((object) => valueOf(() => compiled.program({ object })))
      for (const b of rest) assert.deepEqual(b, a, expression)
    }
  })

  test('a JSONPath judged not to read managedFields gives the same value whatever they hold', () => {
    for (const path of pathNot) {
      assert.equal(reads(undefined, path), false, path)
      const compiled = compileJsonPath(path)
      assert.ok(compiled.ok, path)
      const [a, ...rest] = variants().map((object) => valueOf(() => compiled.program(object)))
      for (const b of rest) assert.deepEqual(b, a, path)
    }
  })

  test('every way of reaching managedFields, or the object or its metadata whole, counts as reading them', () => {
    for (const expression of celReading) assert.equal(reads(expression), true, expression)
    for (const path of pathReading) assert.equal(reads(undefined, path), true, path)
  })

  test('the fields read, as paths from the object', () => {
    assert.deepEqual(celReads('object.metadata.name == object.spec.x'), [['metadata', 'name'], ['spec', 'x']])
    assert.deepEqual(celReads('has(object.a.b) ? object.c : 1'), [['a', 'b'], ['c']])
    assert.equal(celReads('object.('), null)
    assert.deepEqual(jsonPathReads("$.a['b'].c[0].d"), [['a', 'b', 'c']])
  })

  test('a target reads them when its matchPolicy does, or any attribute of any profile it is given', () => {
    const profile = loadExampleCr('profile-deployments.yaml') as { spec: { attributes: unknown[] } }
    const target = loadExampleCr('target-deployments.yaml') as { spec: { matchPolicy: string } }
    const attributes = profile.spec.attributes
    assert.equal(expressionsRead(MANAGED_FIELDS, attributes, target.spec.matchPolicy), false, 'the example profile and target')
    assert.equal(expressionsRead(MANAGED_FIELDS, attributes, 'size(object.metadata.managedFields) > 0'), true)
    assert.equal(expressionsRead(MANAGED_FIELDS, attributes, 7), true, 'a matchPolicy that is not text')
    assert.equal(expressionsRead(MANAGED_FIELDS, [...attributes, { name: 'm', jsonPath: '$.metadata' }]), true)
    // Not an expression: nothing to read (the profile is refused as invalid).
    assert.equal(expressionsRead(MANAGED_FIELDS, [...attributes, { name: 'x' }, null]), false)
  })
})
