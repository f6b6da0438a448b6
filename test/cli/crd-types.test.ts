import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { CrdSchema } from '../../api/crd-schemas.js'
import { renderStatusTypes, renderStatusTypesOf, statusTypeName } from '../../cli/crd-types.js'

// cli/crd-types.ts turns CRD status schemas into the TypeScript status types. The checked-in
// output is kept in step by test/cli/docs.test.ts; these cases pin how a schema becomes a type.

const condition: CrdSchema = {
  type: 'object',
  required: ['type', 'status'],
  properties: { type: { type: 'string' }, status: { type: 'string', enum: ['True', 'False', 'Unknown'] } },
}

/** The declarations without the two header lines, as one string per declaration. */
function declarations(text: string): string[] {
  return text.split('\n').slice(3).join('\n').trimEnd().split('\n\n')
}

test('status type names drop the Kollect prefix', () => {
  assert.deepEqual(['KollectTarget', 'KollectInventory', 'KollectSink'].map(statusTypeName), ['TargetStatus', 'InventoryStatus', 'SinkStatus'])
})

test('fields are optional unless the schema requires them; integers are numbers, enums literal unions, descriptions doc comments', () => {
  const text = renderStatusTypesOf([{
    kind: 'KollectWidget',
    schema: {
      type: 'object',
      description: 'What the widget hook writes.',
      properties: {
        count: { type: 'integer', format: 'int64', description: 'How many.' },
        mode: { type: 'string', enum: ["it's", 'b'] },
        ok: { type: 'boolean' },
        port: { 'x-kubernetes-int-or-string': true },
        labels: { type: 'object', additionalProperties: { type: 'string' } },
      },
    },
  }])
  assert.deepEqual(declarations(text), [[
    '/** What the widget hook writes. */',
    'export interface WidgetStatus {',
    '  /** How many. */',
    '  count?: number',
    "  mode?: 'it\\'s' | 'b'",
    '  ok?: boolean',
    '  port?: number | string',
    '  labels?: Record<string, string>',
    '}',
  ].join('\n')])
})

test('a nested object is named after its path, after the type that uses it; one that kinds share is declared once', () => {
  const text = renderStatusTypesOf([
    { kind: 'KollectA', schema: { type: 'object', properties: {
      conditions: { type: 'array', items: condition },
      entries: { type: 'array', items: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } } },
    } } },
    { kind: 'KollectB', schema: { type: 'object', properties: { conditions: { type: 'array', items: condition }, resource: { type: 'object', properties: { kind: { type: 'string' } } } } } },
  ])
  assert.deepEqual(declarations(text), [
    'export interface AStatus {\n  conditions?: StatusCondition[]\n  entries?: AStatusEntry[]\n}',
    "export interface StatusCondition {\n  type: string\n  status: 'True' | 'False' | 'Unknown'\n}",
    'export interface AStatusEntry {\n  name: string\n}',
    'export interface BStatus {\n  conditions?: StatusCondition[]\n  resource?: BStatusResource\n}',
    'export interface BStatusResource {\n  kind?: string\n}',
  ])
})

test('objects at the same path that differ between kinds keep their own names', () => {
  const other: CrdSchema = { ...condition, properties: { ...condition.properties, reason: { type: 'string' } } }
  const text = renderStatusTypesOf([
    { kind: 'KollectA', schema: { type: 'object', properties: { conditions: { type: 'array', items: condition } } } },
    { kind: 'KollectB', schema: { type: 'object', properties: { conditions: { type: 'array', items: other } } } },
  ])
  assert.match(text, /conditions\?: AStatusCondition\[\]/)
  assert.match(text, /conditions\?: BStatusCondition\[\]/)
  assert.doesNotMatch(text, /interface StatusCondition /)
})

test('a schema the generator cannot type fails loudly, naming the kind and the field', () => {
  const render = (schema: CrdSchema) => () => renderStatusTypesOf([{ kind: 'KollectA', schema: { type: 'object', properties: { x: schema } } }])
  assert.throws(render({ description: 'no type' }), /^Error: KollectA status\.x: cannot type a schema of type undefined$/)
  assert.throws(render({ type: 'array' }), /^Error: KollectA status\.x: an array without items$/)
  assert.throws(render({ type: 'object', properties: { 'not-an-identifier': { type: 'string' } } }), /^Error: KollectA status\.x\.not-an-identifier: not a plain identifier$/)
  assert.throws(() => renderStatusTypesOf([{ kind: 'KollectA', schema: { type: 'string' } }]), /KollectA: the status schema is not an object with properties/)
})

test('the CRDs give each hook-written kind its status type, with the fields the design names', () => {
  const text = renderStatusTypes()
  for (const name of ['ProfileStatus', 'TargetStatus', 'SinkStatus', 'InventoryStatus', 'ScopeStatus', 'StatusCondition', 'InventoryStatusSink']) {
    assert.match(text, new RegExp(`^export interface ${name} \\{$`, 'm'), name)
  }
  for (const field of ['matchedCount', 'extractedCount', 'failedCount', 'lastError', 'checksum', 'conditions']) assert.match(text, new RegExp(`^  ${field}\\?: `, 'm'), field)
  // A condition always has all four of type, status, reason and message.
  assert.match(text, /export interface StatusCondition \{[^}]*\n {2}reason: string\n[^}]*\n {2}message: string\n/)
})
