// The CRD's x-kubernetes-validations rules, evaluated the way the API server does on create and
// update, for `kollect validate`.
import { Environment } from '@marcbachmann/cel-js'
import { crdForKind, type CrdSchema, type KollectKind } from '../api/crd-schemas.js'
import { VERSION } from '../api/types.js'
import { isObject } from './objects.js'

/** One problem of a resource: the field path it is at, and the line to print. */
export interface Finding {
  path: string
  text: string
}

interface CrdRule {
  rule: string
  message?: string
  fieldPath?: string
}

const ruleEnv = new Environment({ enableOptionalTypes: true, homogeneousAggregateLiterals: false }).registerVariable('self', 'dyn')
const ruleCache = new Map<string, ((ctx: { self: unknown }) => unknown) | null>()

function compiledRule(rule: string): ((ctx: { self: unknown }) => unknown) | null {
  if (!ruleCache.has(rule)) {
    let program: ((ctx: { self: unknown }) => unknown) | null = null
    try {
      const parsed = ruleEnv.parse(rule)
      program = (ctx) => parsed(ctx)
    } catch {
      program = null
    }
    ruleCache.set(rule, program)
  }
  return ruleCache.get(rule) ?? null
}

/**
 * The API server evaluates these CEL rules on create and update; api/crd-schemas.ts does not.
 * Transition rules (oldSelf) cannot apply to a file, and a rule that errors on a value of the
 * wrong type is left to the schema error that value already has.
 */
export function ruleFindings(kind: KollectKind, spec: unknown): Finding[] {
  const version = crdForKind(kind).spec.versions.find((v) => v.name === VERSION)
  const schema = version?.schema.openAPIV3Schema.properties?.['spec']
  const out: Finding[] = []
  if (schema) walkRules(schema, spec, 'spec', out)
  return out
}

function walkRules(schema: CrdSchema, value: unknown, path: string, out: Finding[]): void {
  if (value === undefined || value === null) return
  const rules = (schema['x-kubernetes-validations'] as CrdRule[] | undefined) ?? []
  if (rules.length > 0 && typeMatches(schema, value)) {
    for (const r of rules) {
      if (/\boldSelf\b/.test(r.rule)) continue
      const program = compiledRule(r.rule)
      if (!program) continue
      let ok: unknown
      try {
        ok = program({ self: value })
      } catch {
        continue
      }
      if (ok === false) {
        const at = path + (r.fieldPath ?? '')
        out.push({ path: at, text: `${at}: ${r.message ?? `fails rule ${r.rule}`}` })
      }
    }
  }
  if (schema.properties && isObject(value)) {
    for (const [key, sub] of Object.entries(schema.properties)) if (Object.hasOwn(value, key)) walkRules(sub, value[key], child(path, key), out)
  }
  if (isObject(schema.additionalProperties) && isObject(value)) {
    for (const [key, v] of Object.entries(value)) if (!schema.properties?.[key]) walkRules(schema.additionalProperties as CrdSchema, v, child(path, key), out)
  }
  if (schema.items && Array.isArray(value)) value.forEach((v, i) => walkRules(schema.items as CrdSchema, v, `${path}[${i}]`, out))
}

function child(path: string, key: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`
}

function typeMatches(schema: CrdSchema, value: unknown): boolean {
  switch (schema.type) {
    case 'object':
      return isObject(value)
    case 'array':
      return Array.isArray(value)
    case 'string':
      return typeof value === 'string'
    case 'integer':
      return Number.isInteger(value)
    case 'number':
      return typeof value === 'number'
    case 'boolean':
      return typeof value === 'boolean'
    default:
      return true
  }
}
