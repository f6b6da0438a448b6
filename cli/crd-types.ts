import { crdForKind, crdFileForKind, kinds, type CrdSchema } from '../api/crd-schemas.js'
import { VERSION } from '../api/types.js'

// api/status.generated.ts, rendered from the status schemas of the CRDs in manifests/crds: the
// same schemas the status tables of docs/crd-reference.md and validateStatus come from, so the
// status the hooks build, the one the API server accepts and the documented one cannot differ.
// `npm run docs` writes it; test/cli/docs.test.ts fails when the checked-in file is stale.

/** The TypeScript name of a kind's status: KollectTarget → TargetStatus. */
export function statusTypeName(kind: string): string {
  return `${kind.replace(/^Kollect/, '')}Status`
}

export interface StatusSchema {
  kind: string
  schema: CrdSchema
}

export function renderStatusTypes(): string {
  return renderStatusTypesOf(
    kinds.map((kind) => {
      const schema = crdForKind(kind).spec.versions.find((v) => v.name === VERSION)?.schema.openAPIV3Schema.properties?.status
      if (!schema) throw new Error(`${crdFileForKind(kind)}: no ${VERSION} status schema`)
      return { kind, schema }
    }),
  )
}

/**
 * The declarations for some status schemas. A nested object is an interface named after its
 * path (InventoryStatusSink for status.sinks[]); one that several kinds declare identically at
 * the same path is declared once, without the kind (StatusCondition).
 */
export function renderStatusTypesOf(statuses: StatusSchema[]): string {
  const shared = sharedPaths(statuses)
  const declared = new Map<string, string>()
  const out: string[] = [
    '// Generated from the status schemas in manifests/crds by cli/crd-types.ts: run `npm run docs`;',
    '// do not edit by hand. test/cli/docs.test.ts fails when this file and the CRDs differ.',
  ]
  // Paths run from the status (`status.sinks[].state`); errors name the kind too.
  // A declaration comes before the ones it uses: its slot is taken before its body is rendered.
  const declare = (name: string, schema: CrdSchema, path: string, kind: string): string => {
    const before = declared.get(name)
    if (before !== undefined) {
      if (before !== interfaceOf(name, schema, path, kind)) throw new Error(`${kind} ${path}: two different schemas would both be ${name}`)
      return name
    }
    const slot = out.push('', '') - 1
    const body = interfaceOf(name, schema, path, kind)
    declared.set(name, body)
    out[slot] = body
    return name
  }
  const interfaceOf = (name: string, schema: CrdSchema, path: string, kind: string): string => {
    const lines = [...doc(schema.description, ''), `export interface ${name} {`]
    for (const [key, sub] of Object.entries(schema.properties ?? {})) {
      if (!/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key)) throw new Error(`${kind} ${path}.${key}: not a plain identifier`)
      const optional = schema.required?.includes(key) === true ? '' : '?'
      lines.push(...doc(sub.description, '  '), `  ${key}${optional}: ${typeOf(sub, `${path}.${key}`, kind, name + pascal(key))}`)
    }
    lines.push('}')
    return lines.join('\n')
  }
  const typeOf = (schema: CrdSchema, path: string, kind: string, name: string): string => {
    if (schema['x-kubernetes-int-or-string'] === true) return 'number | string'
    if (Array.isArray(schema.enum)) return schema.enum.map(literal).join(' | ')
    switch (schema.type) {
      case 'string':
        return 'string'
      case 'integer':
      case 'number':
        return 'number'
      case 'boolean':
        return 'boolean'
      case 'array': {
        if (!schema.items) throw new Error(`${kind} ${path}: an array without items`)
        const item = typeOf(schema.items, `${path}[]`, kind, singular(name))
        return item.includes(' ') ? `(${item})[]` : `${item}[]`
      }
      case 'object':
        if (schema.properties) return declare(shared.has(path) ? `Status${lastSegment(name, kind)}` : name, schema, path, kind)
        if (typeof schema.additionalProperties === 'object') {
          return `Record<string, ${typeOf(schema.additionalProperties, `${path}.<key>`, kind, `${name}Value`)}>`
        }
        if (schema['x-kubernetes-preserve-unknown-fields'] === true) return 'Record<string, unknown>'
    }
    throw new Error(`${kind} ${path}: cannot type a schema of type ${String(schema.type)}`)
  }
  for (const { kind, schema } of statuses) {
    if (schema.type !== 'object' || !schema.properties) throw new Error(`${kind}: the status schema is not an object with properties`)
    declare(statusTypeName(kind), schema, 'status', kind)
  }
  return out.join('\n') + '\n'
}

/** Paths below status (`status.conditions[]`) at which more than one kind declares the same object. */
function sharedPaths(statuses: StatusSchema[]): Set<string> {
  const seen = new Map<string, { schema: string; kinds: number }>()
  const conflicting = new Set<string>()
  const visit = (schema: CrdSchema, path: string) => {
    if (path !== 'status' && schema.type === 'object' && schema.properties) {
      const json = JSON.stringify(schema)
      const before = seen.get(path)
      if (!before) seen.set(path, { schema: json, kinds: 1 })
      else if (before.schema === json) before.kinds++
      else conflicting.add(path)
    }
    for (const [key, sub] of Object.entries(schema.properties ?? {})) visit(sub, `${path}.${key}`)
    if (schema.items) visit(schema.items, `${path}[]`)
  }
  for (const { schema } of statuses) visit(schema, 'status')
  return new Set([...seen].filter(([path, s]) => s.kinds > 1 && !conflicting.has(path)).map(([path]) => path))
}

/** The part of a generated name after its kind's status name: TargetStatusCondition → Condition. */
function lastSegment(name: string, kind: string): string {
  return name.slice(statusTypeName(kind).length)
}

function pascal(key: string): string {
  return key.charAt(0).toUpperCase() + key.slice(1)
}

/** The element of a plural property name: Conditions → Condition, Sinks → Sink, Entries → Entry. */
function singular(name: string): string {
  if (name.endsWith('ies')) return `${name.slice(0, -3)}y`
  if (name.endsWith('s') && !name.endsWith('ss')) return name.slice(0, -1)
  return `${name}Item`
}

/** A literal type in the house quotes. */
function literal(value: unknown): string {
  if (typeof value !== 'string') return JSON.stringify(value)
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`
}

function doc(description: string | undefined, indent: string): string[] {
  if (!description) return []
  const text = description.replace(/\s*\n\s*/g, ' ').trim().replace(/\*\//g, '*\\/')
  return [`${indent}/** ${text} */`]
}
