// The CRD YAML in manifests/crds is the one source of truth for the shape of Kollect resources.
// This module validates against it (crds.ts reads it), so that hooks and tests check specs and
// statuses against exactly what the API server will enforce, instead of a hand-copied schema that drifts.
//
// What is emulated: OpenAPI types, enums, patterns, lengths, required fields, formats and
// x-kubernetes-list-type uniqueness. What is not: x-kubernetes-validations (CEL); the API server
// enforces those and the hooks re-check the same rules in code.

import { Ajv, type AnySchemaObject, type ErrorObject, type SchemaValidateFunction, type ValidateFunction } from 'ajv'
import addFormatsModule from 'ajv-formats'
import { crdFileForKind, crdVersion, type CrdSchema, type KollectKind } from './crds.js'

// Where the CRDs are read is crds.ts; its names are re-exported so that callers keep one import.
export {
  crdFileForKind, crdForKind, findCrdDir, kinds, type CrdSchema, type KollectKind, type PrinterColumn,
} from './crds.js'

interface SchemaError {
  /** Where, from the resource's root: `spec.attributes[2].cel`, `status.sinks[0].state`. */
  path: string
  message: string
}

export type ValidationResult = { valid: true } | { valid: false; errors: SchemaError[] }

export interface ValidateSpecOptions {
  /**
   * Report fields the schema does not declare. Off by default, because the API server prunes
   * such fields from specs rather than rejecting them; kubectl's strict field validation does
   * reject them, which is what a check of users' YAML wants.
   */
  rejectUnknownFields?: boolean
}

type Part = 'spec' | 'status'
type DataValidationCxt = Parameters<SchemaValidateFunction>[3]

let compiled: { ajv: Ajv; validators: Map<string, ValidateFunction> } | undefined

/** The spec's schema as the CRD declares it, for schemas that embed a spec (server/exporter-api/schemas.ts). */
export function specSchema(kind: KollectKind): CrdSchema {
  const schema = crdVersion(kind).schema.openAPIV3Schema.properties?.['spec']
  if (!schema) throw new Error(`${crdFileForKind(kind)}: no spec schema`)
  return schema
}

/**
 * Check a spec against the CRD's schema. Defaults are not applied: a field the API server
 * would default may be absent here and still valid.
 */
export function validateSpec(kind: KollectKind, spec: unknown, options: ValidateSpecOptions = {}): ValidationResult {
  if (spec === undefined) {
    const root = crdVersion(kind).schema.openAPIV3Schema
    return root.required?.includes('spec') ? invalid([{ path: 'spec', message: 'required field is missing' }]) : { valid: true }
  }
  return run(kind, 'spec', spec, options.rejectUnknownFields === true)
}

/** The spec's schema problems as `path: message` lines, for status and the CLI; empty when valid. */
export function specProblems(kind: KollectKind, spec: unknown): string[] {
  const result = validateSpec(kind, spec)
  return result.valid ? [] : result.errors.map((e) => `${e.path}: ${e.message}`)
}

/**
 * Check a status as a hook would return it. Unknown fields fail: the API server would prune
 * them, the stored status would differ from the hook's, and Metacontroller would write it again
 * on every sync. A status that passes survives the round trip unchanged.
 */
export function validateStatus(kind: KollectKind, status: unknown): ValidationResult {
  if (status === undefined) return { valid: true }
  return run(kind, 'status', status, true)
}

// ---- compiling ----

// Keywords only the API server acts on (CEL rules, map types, pruning switches): declared so
// that ajv accepts them as annotations.
const KUBERNETES_ANNOTATIONS = [
  'x-kubernetes-validations',
  'x-kubernetes-map-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-embedded-resource',
  'x-kubernetes-int-or-string',
]

function newAjv(): Ajv {
  const ajv = new Ajv({ strict: false, allErrors: true })
  addFormatsModule.default(ajv)
  return kubernetesKeywords(ajv)
}

/** An ajv plugin: the Kubernetes keywords of the CRD schemas, for any ajv that compiles parts of them. */
export function kubernetesKeywords(ajv: Ajv): Ajv {
  for (const keyword of KUBERNETES_ANNOTATIONS) ajv.addKeyword({ keyword })
  // The API server rejects duplicates in list-type set and map lists; a hook that emits two
  // conditions of one type would otherwise pass here and fail on the status write.
  ajv.addKeyword({ keyword: 'x-kubernetes-list-type', type: 'array', schemaType: 'string', errors: true, validate: validateListType })
  return ajv
}

const validateListType: SchemaValidateFunction = function (listType: unknown, data: unknown, parentSchema?: AnySchemaObject, cxt?: DataValidationCxt): boolean {
  validateListType.errors = []
  if (!Array.isArray(data) || (listType !== 'set' && listType !== 'map')) return true
  const keys = listType === 'map' ? ((parentSchema?.['x-kubernetes-list-map-keys'] as string[] | undefined) ?? []) : []
  const seen = new Map<string, number>()
  data.forEach((item: unknown, index) => {
    const identity = listType === 'set' ? item : Object.fromEntries(keys.map((k) => [k, isObject(item) ? item[k] : undefined]))
    const key = JSON.stringify(identity)
    const first = seen.get(key)
    if (first === undefined) seen.set(key, index)
    else {
      validateListType.errors?.push({
        keyword: 'x-kubernetes-list-type',
        instancePath: `${cxt?.instancePath ?? ''}/${index}`,
        params: { duplicateOf: first },
        message: `duplicate entry ${key}, first at index ${first}`,
      })
    }
  })
  return validateListType.errors.length === 0
}

function validatorFor(kind: KollectKind, part: Part, closed: boolean): ValidateFunction {
  compiled ??= { ajv: newAjv(), validators: new Map() }
  const st = compiled
  const cacheKey = `${kind}/${part}/${closed ? 'closed' : 'open'}`
  let validate = st.validators.get(cacheKey)
  if (!validate) {
    const schema = crdVersion(kind).schema.openAPIV3Schema.properties?.[part]
    if (!schema) throw new Error(`${crdFileForKind(kind)}: no ${part} schema`)
    validate = st.ajv.compile(closed ? closeObjects(schema) : schema)
    st.validators.set(cacheKey, validate)
  }
  return validate
}

/** A copy in which every object that lists its properties accepts no others. */
function closeObjects(schema: CrdSchema): CrdSchema {
  const out: CrdSchema = { ...schema }
  if (schema.properties) {
    out.properties = Object.fromEntries(Object.entries(schema.properties).map(([k, v]) => [k, closeObjects(v)]))
    if (schema.additionalProperties === undefined && schema['x-kubernetes-preserve-unknown-fields'] !== true) {
      out.additionalProperties = false
    }
  }
  if (schema.items) out.items = closeObjects(schema.items)
  if (isObject(schema.additionalProperties)) out.additionalProperties = closeObjects(schema.additionalProperties as CrdSchema)
  return out
}

// ---- validating and reporting ----

function run(kind: KollectKind, part: Part, value: unknown, closed: boolean): ValidationResult {
  const validate = validatorFor(kind, part, closed)
  if (validate(value)) return { valid: true }
  return invalid(dedupe((validate.errors ?? []).map((e) => toSchemaError(part, value, e))))
}

function invalid(errors: SchemaError[]): ValidationResult {
  return { valid: false, errors }
}

function toSchemaError(root: Part, value: unknown, error: ErrorObject): SchemaError {
  const segments = error.instancePath === '' ? [] : error.instancePath.slice(1).split('/').map(unescapePointer)
  const params = error.params as Record<string, unknown>
  switch (error.keyword) {
    case 'required':
      return { path: formatPath(root, value, [...segments, String(params.missingProperty)]), message: 'required field is missing' }
    case 'additionalProperties':
      return { path: formatPath(root, value, [...segments, String(params.additionalProperty)]), message: 'unknown field' }
    case 'enum':
      return {
        path: formatPath(root, value, segments),
        message: `must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`,
      }
    default:
      return { path: formatPath(root, value, segments), message: error.message ?? `fails ${error.keyword}` }
  }
}

/** `spec.attributes[2].cel`, with bracketed quotes for keys that are not identifiers. */
function formatPath(root: string, value: unknown, segments: string[]): string {
  let path = root
  let node: unknown = value
  for (const segment of segments) {
    if (Array.isArray(node) && /^(0|[1-9][0-9]*)$/.test(segment)) {
      path += `[${segment}]`
      node = node[Number(segment)]
      continue
    }
    path += /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(segment) ? `.${segment}` : `[${JSON.stringify(segment)}]`
    node = isObject(node) ? node[segment] : undefined
  }
  return path
}

function unescapePointer(segment: string): string {
  return segment.replace(/~1/g, '/').replace(/~0/g, '~')
}

function dedupe(errors: SchemaError[]): SchemaError[] {
  const seen = new Set<string>()
  return errors.filter((e) => {
    const key = `${e.path}\u0000${e.message}`
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}
