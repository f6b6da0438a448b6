import { parseAllDocuments } from 'yaml'
import type { KubeObject } from '../api/types.js'

// Reading objects from text: Kollect resources from users' YAML, and the objects a preview runs
// over, from `kubectl get -o json|yaml` output. Reading them from a cluster is cluster.ts.

export interface SyntaxProblem {
  message: string
  /** 1-based, in the whole file. */
  line?: number
  column?: number
}

/** One document of a file: its value, or why it does not parse. */
export interface ParsedDocument {
  /** 1-based position in the file. */
  index: number
  value?: unknown
  error?: SyntaxProblem
}

/**
 * Every document of a YAML stream (JSON is YAML too). Text that is one JSON value is read with
 * JSON.parse first: `kubectl get -o json` of a large namespace is tens of MiB, and the YAML
 * parser is an order of magnitude slower on it. A JSON syntax error falls back to the YAML
 * parser, which reports a line and a column.
 */
export function parseDocuments(text: string): ParsedDocument[] {
  const head = text.trimStart()[0]
  if (head === '{' || head === '[') {
    try {
      return [{ index: 1, value: JSON.parse(text) as unknown }]
    } catch {
      // reported by the YAML parser below, with a position
    }
  }
  const docs = parseAllDocuments(text, { prettyErrors: true, uniqueKeys: true })
  const list = Array.isArray(docs) ? docs : [docs]
  return list.map((doc, i): ParsedDocument => {
    const index = i + 1
    const first = doc.errors[0]
    if (first) {
      const pos = first.linePos?.[0]
      const message = (first.message.split('\n')[0] ?? first.code).replace(/ at line \d+, column \d+:?$/, '')
      return { index, error: pos ? { message, line: pos.line, column: pos.col } : { message } }
    }
    return { index, value: doc.toJS({ maxAliasCount: 100 }) as unknown }
  })
}

export function describeSyntaxProblem(p: SyntaxProblem): string {
  const where = p.line === undefined ? '' : ` at line ${p.line}${p.column === undefined ? '' : `, column ${p.column}`}`
  return `YAML syntax error${where}: ${p.message}`
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

/** `kubectl get` answers a `List` (or a typed `DeploymentList`) with `items`. */
export function isList(value: unknown): value is { apiVersion?: string; kind: string; items: unknown[] } {
  return isObject(value) && typeof value.kind === 'string' && value.kind.endsWith('List') && Array.isArray(value.items)
}

/**
 * The objects in some documents: lists are unwrapped, empty documents dropped. Items of a typed
 * list as the API server returns it (`DeploymentList`) carry no apiVersion and kind; they get
 * the list's.
 */
export function objectsOf(values: unknown[]): { objects: KubeObject[]; ignored: number } {
  const objects: KubeObject[] = []
  let ignored = 0
  const add = (value: unknown, fallback?: { apiVersion?: string; kind?: string }) => {
    if (value === null || value === undefined) return
    if (isList(value)) {
      const itemKind = value.kind !== 'List' ? value.kind.slice(0, -'List'.length) : undefined
      for (const item of value.items) add(item, { apiVersion: value.apiVersion, kind: itemKind })
      return
    }
    if (Array.isArray(value)) {
      for (const item of value) add(item, fallback)
      return
    }
    if (!isObject(value)) {
      ignored++
      return
    }
    const object = value as KubeObject
    if (fallback && (object.apiVersion === undefined || object.kind === undefined)) {
      objects.push({ ...object, apiVersion: object.apiVersion ?? fallback.apiVersion, kind: object.kind ?? fallback.kind })
    } else objects.push(object)
  }
  for (const v of values) add(v)
  return { objects, ignored }
}

/** "KollectProfile team-a/deployments-basic", for messages. */
export function describeObject(value: unknown): string {
  if (!isObject(value)) return Array.isArray(value) ? 'a list' : `a ${value === null ? 'null' : typeof value}`
  const kind = typeof value.kind === 'string' ? value.kind : '(no kind)'
  const meta = isObject(value.metadata) ? value.metadata : {}
  const name = typeof meta.name === 'string' ? meta.name : ''
  const ns = typeof meta.namespace === 'string' && meta.namespace !== '' ? `${meta.namespace}/` : ''
  return name === '' ? kind : `${kind} ${ns}${name}`
}
