// The CRD YAML in manifests/crds is the one source of truth for the shape of Kollect resources.
// This module finds and reads it (lazily, once); crd-schemas.ts validates against it.

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parse as parseYaml } from 'yaml'
import { GROUP, VERSION } from './types.js'

export const kinds = ['KollectProfile', 'KollectTarget', 'KollectSink', 'KollectInventory', 'KollectScope'] as const
export type KollectKind = (typeof kinds)[number]

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

let loaded: Map<KollectKind, { crd: CustomResourceDefinition; file: string }> | undefined

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

/** The served version's schema of a kind; throws when the CRD has none. */
export function crdVersion(kind: KollectKind): CrdVersion {
  const { crd, file } = entry(kind)
  const version = crd.spec.versions.find((v) => v.name === VERSION)
  if (!version?.schema?.openAPIV3Schema) throw new Error(`${file}: no ${VERSION} schema`)
  return version
}

function load(): Map<KollectKind, { crd: CustomResourceDefinition; file: string }> {
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
  loaded = crds
  return loaded
}

function entry(kind: KollectKind): { crd: CustomResourceDefinition; file: string } {
  const found = load().get(kind)
  if (!found) throw new Error(`unknown kind ${String(kind)}`)
  return found
}

function isCrd(doc: unknown): doc is CustomResourceDefinition {
  if (!isObject(doc) || doc.kind !== 'CustomResourceDefinition') return false
  const spec = doc.spec
  return isObject(spec) && typeof spec.group === 'string' && isObject(spec.names) && typeof spec.names.kind === 'string' && Array.isArray(spec.versions)
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

function isDirectory(path: string): boolean {
  return existsSync(path) && statSync(path).isDirectory()
}
