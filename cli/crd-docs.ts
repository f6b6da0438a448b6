import { relative, resolve } from 'node:path'
import { crdFileForKind, crdForKind, findCrdDir, kinds, type CrdSchema, type KollectKind, type PrinterColumn } from '../api/crd-schemas.js'
import { VERSION } from '../api/types.js'
import { statusTypeName } from './crd-types.js'

// docs/crd-reference.md, rendered from the CRDs in manifests/crds: every field of every kind
// with its type, default, constraints and description, the validation rules, the printer
// columns and the names. `npm run docs` writes it; test/cli/docs.test.ts fails when the
// checked-in file and this rendering differ, so the reference cannot drift from the schemas.

/** The repository root: two levels above manifests/crds (KOLLECT_CRD_DIR is ignored here). */
export function repoRoot(): string {
  return resolve(findCrdDir(import.meta.url, {}), '..', '..')
}

export function crdReferencePath(): string {
  return resolve(repoRoot(), 'docs', 'crd-reference.md')
}

/** The TypeScript status types, rendered by cli/crd-types.ts in the same step. */
export function statusTypesPath(): string {
  return resolve(repoRoot(), 'api', 'status.generated.ts')
}

interface FieldRow {
  path: string
  schema: CrdSchema
  required: boolean
}

interface RuleRow {
  path: string
  rule: string
  message: string
}

export function renderCrdReference(): string {
  const out: string[] = []
  out.push('# Kollect CRD reference')
  out.push('')
  out.push('<!-- Generated from manifests/crds by cli/gen-crd-docs.ts: run `npm run docs`; do not edit by hand.')
  out.push('     test/cli/docs.test.ts fails when this file and the CRDs differ. -->')
  out.push('')
  out.push(`Every Kollect resource is \`kollect.dev/${VERSION}\`. Check your YAML against these schemas before`)
  out.push('applying it with `kollect validate FILE…`, and try a profile and target with `kollect preview`')
  out.push('([Trying a profile before turning it on](preview.md)).')
  out.push('')
  // Four columns fit the site's content column; each kind's section gives its plural.
  out.push('| Kind | Short names | Scope | What it is |')
  out.push('|---|---|---|---|')
  for (const kind of kinds) {
    const crd = crdForKind(kind)
    out.push(row([`[${kind}](#${kind.toLowerCase()})`, list(crd.spec.names.shortNames), crd.spec.scope, firstSentence(rootSchema(kind).description ?? '')]))
  }
  for (const kind of kinds) out.push('', ...renderKind(kind))
  return out.join('\n') + '\n'
}

function rootSchema(kind: KollectKind): CrdSchema {
  const version = crdForKind(kind).spec.versions.find((v) => v.name === VERSION)
  if (!version) throw new Error(`${crdFileForKind(kind)}: no ${VERSION} version`)
  return version.schema.openAPIV3Schema
}

function renderKind(kind: KollectKind): string[] {
  const crd = crdForKind(kind)
  const version = crd.spec.versions.find((v) => v.name === VERSION)
  const root = rootSchema(kind)
  const names = crd.spec.names
  const out: string[] = [`## ${kind}`, '']
  if (root.description) out.push(oneLine(root.description), '')
  out.push('| | |', '|---|---|')
  out.push(row(['API version', code(`${crd.spec.group}/${VERSION}`)]))
  out.push(row(['Scope', crd.spec.scope]))
  out.push(row(['Plural / singular', `${code(names.plural)} / ${code(names.singular)}`]))
  out.push(row(['Short names', list(names.shortNames)]))
  out.push(row(['Categories', list(names.categories)]))
  out.push(row(['Subresources', Object.keys(version?.subresources ?? {}).sort().join(', ') || 'none']))
  out.push(row(['Defined in', code(relative(repoRoot(), crdFileForKind(kind)).split('\\').join('/'))]))

  const columns = version?.additionalPrinterColumns ?? []
  if (columns.length > 0) {
    out.push('', '### Printer columns', '')
    out.push(`\`kubectl get ${names.shortNames?.[0] ?? names.plural}\` shows these columns; \`-o wide\` adds the ones marked wide.`, '')
    out.push('| Column | Type | JSONPath | Description |', '|---|---|---|---|')
    for (const c of columns) {
      out.push(row([
        `${c.name}${wide(c) ? ' (wide)' : ''}`, c.type + (c.format ? ` (${c.format})` : ''),
        code(c.jsonPath), oneLine(c.description ?? defaultColumnDescription(c)),
      ]))
    }
  }

  for (const part of ['spec', 'status'] as const) {
    const schema = root.properties?.[part]
    if (!schema) continue
    const fields: FieldRow[] = []
    const rules: RuleRow[] = []
    walk(schema, part, root.required?.includes(part) === true, fields, rules)
    out.push('', `### ${part === 'spec' ? 'Spec' : 'Status'}`, '')
    if (part === 'status') {
      out.push(`In TypeScript this is \`${statusTypeName(kind)}\` of [api/status.generated.ts](../api/status.generated.ts), ` +
        'generated from the same schema.', '')
    }
    out.push('| Field | Type | Required | Default | Constraints | Description |', '|---|---|---|---|---|---|')
    for (const f of fields) {
      const fallback = f.schema.default === undefined ? '' : code(scalar(f.schema.default))
      out.push(row([code(f.path), typeOf(f.schema), f.required ? 'yes' : '', fallback, constraints(f.schema), oneLine(f.schema.description ?? '')]))
    }
    if (rules.length > 0) {
      out.push('', `Validation rules (\`x-kubernetes-validations\`, enforced by the API server and by \`kollect validate\`) on the ${part}:`, '')
      out.push('| Field | Rule | Message |', '|---|---|---|')
      for (const r of rules) out.push(row([code(r.path), code(r.rule), oneLine(r.message)]))
    }
  }
  return out
}

function walk(schema: CrdSchema, path: string, required: boolean, fields: FieldRow[], rules: RuleRow[]): void {
  fields.push({ path, schema, required })
  for (const r of (schema['x-kubernetes-validations'] as { rule: string; message?: string; fieldPath?: string }[] | undefined) ?? []) {
    rules.push({ path: path + (r.fieldPath ?? ''), rule: r.rule, message: r.message ?? '' })
  }
  const children = (node: CrdSchema, prefix: string) => {
    for (const [key, sub] of Object.entries(node.properties ?? {})) walk(sub, `${prefix}.${key}`, node.required?.includes(key) === true, fields, rules)
  }
  children(schema, path)
  if (schema.items) {
    const items = schema.items
    for (const r of (items['x-kubernetes-validations'] as { rule: string; message?: string; fieldPath?: string }[] | undefined) ?? []) {
      rules.push({ path: `${path}[]${r.fieldPath ?? ''}`, rule: r.rule, message: r.message ?? '' })
    }
    children(items, `${path}[]`)
  }
  if (schema.additionalProperties && typeof schema.additionalProperties === 'object' && schema.additionalProperties.properties) {
    children(schema.additionalProperties, `${path}.<key>`)
  }
}

function typeOf(schema: CrdSchema): string {
  if (schema['x-kubernetes-int-or-string'] === true) return 'integer or string'
  const format = typeof schema.format === 'string' ? ` (${schema.format})` : ''
  if (schema.type === 'array') return `array of ${schema.items ? typeOf(schema.items) : 'any'}`
  if (schema.type === 'object' && schema.additionalProperties && typeof schema.additionalProperties === 'object') {
    return `map of ${typeOf(schema.additionalProperties)}`
  }
  if (schema['x-kubernetes-preserve-unknown-fields'] === true) return `${schema.type ?? 'any'} (any fields)`
  return (schema.type ?? 'any') + format
}

function constraints(schema: CrdSchema): string {
  const parts: string[] = []
  if (Array.isArray(schema.enum)) parts.push(`one of ${schema.enum.map((v) => code(scalar(v))).join(', ')}`)
  if (typeof schema.pattern === 'string') parts.push(`pattern ${code(schema.pattern)}`)
  const range = (min: unknown, max: unknown, unit: string) => {
    if (typeof min === 'number' && typeof max === 'number') parts.push(`${min}–${max} ${unit}`)
    else if (min === 1) parts.push('not empty')
    else if (typeof min === 'number' && min > 0) parts.push(`at least ${min} ${unit}`)
    else if (typeof max === 'number') parts.push(`at most ${max} ${unit}`)
  }
  range(schema.minLength, schema.maxLength, 'characters')
  range(schema.minItems, schema.maxItems, 'items')
  if (typeof schema.minimum === 'number') parts.push(`≥ ${schema.minimum}`)
  if (typeof schema.maximum === 'number') parts.push(`≤ ${schema.maximum}`)
  const listType = schema['x-kubernetes-list-type']
  if (listType === 'set') parts.push('unique items')
  if (listType === 'map') parts.push(`unique by ${((schema['x-kubernetes-list-map-keys'] as string[] | undefined) ?? []).map(code).join(', ')}`)
  if (schema['x-kubernetes-map-type'] === 'atomic') parts.push('replaced as a whole')
  return parts.join('; ')
}

function wide(c: PrinterColumn): boolean {
  return typeof c.priority === 'number' && c.priority > 0
}

function defaultColumnDescription(c: PrinterColumn): string {
  return c.jsonPath === '.metadata.creationTimestamp' ? 'Time since the resource was created.' : ''
}

function scalar(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value)
}

function list(values: string[] | undefined): string {
  return values && values.length > 0 ? values.map(code).join(', ') : ''
}

/** An inline code span that survives backticks in the text. */
function code(text: string): string {
  if (!text.includes('`')) return `\`${text}\``
  return `\`\` ${text} \`\``
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').trim()
}

function firstSentence(text: string): string {
  const t = oneLine(text)
  const end = t.search(/\.(\s|$)/)
  return end < 0 ? t : t.slice(0, end + 1)
}

/** A table row; a pipe inside a cell (patterns have them) is escaped, also inside code spans (GFM). */
function row(cells: string[]): string {
  return `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`
}
