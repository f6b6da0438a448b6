// The CRD YAML in manifests/crds is the one source of truth for the shape of Kollect resources.
// This module reads it (lazily, once) so that hooks and tests check specs and statuses against
// exactly what the API server will enforce, instead of a hand-copied schema that drifts.
//
// What is emulated: OpenAPI types, enums, patterns, lengths, required fields, formats and
// x-kubernetes-list-type uniqueness. What is not: x-kubernetes-validations (CEL); the API server
// enforces those and the hooks re-check the same rules in code.

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Ajv, type AnySchemaObject, type ErrorObject, type SchemaValidateFunction, type ValidateFunction } from 'ajv'
import addFormatsModule from 'ajv-formats'
import { parse as parseYaml } from 'yaml'
import { GROUP, VERSION } from './types.js'

export const kinds = ['KollectProfile', 'KollectTarget', 'KollectSink', 'KollectInventory', 'KollectScope'] as const
export type KollectKind = (typeof kinds)[number]

export interface SchemaError {
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

/** An OpenAPI v3 schema node as written in a CRD. */
export interface CrdSchema {
  type?: string
  description?: string
  properties?: Record<string, CrdSchema>
  items?: CrdSchema
  additionalProperties?: CrdSchema | boolean
  required?: string[]
  [keyword: string]: unknown
}

export interface PrinterColumn {
  name: string
  type: string
  jsonPath: string
  description?: string
  priority?: number
  format?: string
}

export interface CrdVersion {
  name: string
  served: boolean
  storage: boolean
  subresources?: { status?: Record<string, never>; scale?: unknown }
  additionalPrinterColumns?: PrinterColumn[]
  schema: { openAPIV3Schema: CrdSchema }
}

export interface CustomResourceDefinition {
  apiVersion: string
  kind: 'CustomResourceDefinition'
  metadata: { name: string; labels?: Record<string, string> }
  spec: {
    group: string
    scope: 'Namespaced' | 'Cluster'
    names: { kind: string; listKind: string; plural: string; singular: string; shortNames?: string[]; categories?: string[] }
    versions: CrdVersion[]
  }
}

type Part = 'spec' | 'status'
type DataValidationCxt = Parameters<SchemaValidateFunction>[3]

interface Loaded {
  dir: string
  crds: Map<KollectKind, { crd: CustomResourceDefinition; file: string }>
  ajv: Ajv
  validators: Map<string, ValidateFunction>
}

let loaded: Loaded | undefined

/**
 * The directory holding the CRD files: $KOLLECT_CRD_DIR when set, else the nearest
 * `manifests/crds` above this module. Searching upward works both from the TS source (api/)
 * and from the compiled module (dist/api/), and from an installed copy of the package.
 */
export function findCrdDir(from: string = import.meta.url, env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env.KOLLECT_CRD_DIR
  if (fromEnv) {
    const dir = resolve(fromEnv)
    if (!isDirectory(dir)) throw new Error(`KOLLECT_CRD_DIR=${fromEnv} is not a directory`)
    return dir
  }
  const start = from.startsWith('file:') ? fileURLToPath(from) : resolve(from)
  let dir = isDirectory(start) ? start : dirname(start)
  for (;;) {
    const candidate = join(dir, 'manifests', 'crds')
    if (isDirectory(candidate)) return candidate
    const parent = dirname(dir)
    if (parent === dir) throw new Error(`no manifests/crds directory above ${start}; set KOLLECT_CRD_DIR`)
    dir = parent
  }
}

/** The CRD of a Kollect kind, as parsed from its YAML file. */
export function crdForKind(kind: KollectKind): CustomResourceDefinition {
  return entry(kind).crd
}

/** The file the CRD of a kind was read from. */
export function crdFileForKind(kind: KollectKind): string {
  return entry(kind).file
}

/** The spec's schema as the CRD declares it, for schemas that embed a spec (server/exporter-schemas.ts). */
export function specSchema(kind: KollectKind): CrdSchema {
  const schema = versionOf(kind).schema.openAPIV3Schema.properties?.['spec']
  if (!schema) throw new Error(`${crdFileForKind(kind)}: no spec schema`)
  return schema
}

/**
 * Check a spec against the CRD's schema. Defaults are not applied: a field the API server
 * would default may be absent here and still valid.
 */
export function validateSpec(kind: KollectKind, spec: unknown, options: ValidateSpecOptions = {}): ValidationResult {
  if (spec === undefined) {
    const root = versionOf(kind).schema.openAPIV3Schema
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

// ---- loading ----

function state(): Loaded {
  if (loaded) return loaded
  const dir = findCrdDir()
  const crds = new Map<KollectKind, { crd: CustomResourceDefinition; file: string }>()
  for (const name of readdirSync(dir).sort()) {
    if (!/\.ya?ml$/.test(name) || name.startsWith('kustomization.')) continue
    const file = join(dir, name)
    const doc: unknown = parseYaml(readFileSync(file, 'utf8'))
    if (!isCrd(doc) || doc.spec.group !== GROUP) continue
    const kind = doc.spec.names.kind
    if (!(kinds as readonly string[]).includes(kind)) continue
    if (crds.has(kind as KollectKind)) throw new Error(`${file}: a second CRD for ${kind}`)
    crds.set(kind as KollectKind, { crd: doc, file })
  }
  const missing = kinds.filter((k) => !crds.has(k))
  if (missing.length > 0) throw new Error(`${dir}: no CRD for ${missing.join(', ')}`)
  loaded = { dir, crds, ajv: newAjv(), validators: new Map() }
  return loaded
}

function entry(kind: KollectKind): { crd: CustomResourceDefinition; file: string } {
  const found = state().crds.get(kind)
  if (!found) throw new Error(`unknown kind ${String(kind)}`)
  return found
}

function versionOf(kind: KollectKind): CrdVersion {
  const { crd, file } = entry(kind)
  const version = crd.spec.versions.find((v) => v.name === VERSION)
  if (!version?.schema?.openAPIV3Schema) throw new Error(`${file}: no ${VERSION} schema`)
  return version
}

function isCrd(doc: unknown): doc is CustomResourceDefinition {
  if (!isObject(doc) || doc.kind !== 'CustomResourceDefinition') return false
  const spec = doc.spec
  return isObject(spec) && typeof spec.group === 'string' && isObject(spec.names) && typeof spec.names.kind === 'string' && Array.isArray(spec.versions)
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
  const st = state()
  const cacheKey = `${kind}/${part}/${closed ? 'closed' : 'open'}`
  let validate = st.validators.get(cacheKey)
  if (!validate) {
    const schema = versionOf(kind).schema.openAPIV3Schema.properties?.[part]
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

function isDirectory(path: string): boolean {
  return existsSync(path) && statSync(path).isDirectory()
}
