import path from 'node:path'
import YAML from 'yaml'
import { canonicalJsonPretty, itemHash, itemKey, sortKeys } from '../api/canonical.js'
import type { Item, Snapshot } from '../api/types.js'
import type { HeldItem } from './diff.js'
import { configError, type SinkLabel } from './errors.js'
import { escapePathSegment, renderPath, type TemplateValues } from './escape.js'

// The snapshot as a file people read and diff, and the per-item files of perResource layouts:
// shared by every sink that writes documents (file, git, s3), so what one wrote another reads back.

export type DocumentFormat = 'json' | 'yaml'

// Each item's pretty text, indented as an element of "items"; unchanged items keep their object
// identity across exports, so a 1-item change re-renders one item, not ten thousand. Only "\n"
// starts a line: /^/m would also indent after a U+2028 that JSON leaves raw inside a string.
// split/join, not replace(/\n/g): held per item, the replace result took 4.5 times its length
// of heap on V8 (7.8 KB for a 1.7 KB item), the joined string its length.
const renderedItems = new WeakMap<Item, string>()

function itemAsElement(item: Item): string {
  let text = renderedItems.get(item)
  if (text === undefined) {
    text = '    ' + canonicalJsonPretty(item).trimEnd().split('\n').join('\n    ')
    renderedItems.set(item, text)
  }
  return text
}

const EMPTY_ITEMS = '\n  "items": []'

export function renderSnapshot(snapshot: Snapshot, format: DocumentFormat = 'json'): string {
  // Byte-identical to canonicalJsonPretty(snapshot): the envelope's keys sort around "items".
  if (format === 'json') return renderWithItems({ ...snapshot, items: [] }, snapshot.items)
  // No folding and no anchors: a long string or a repeated value must stay one stable line.
  return YAML.stringify(sortKeys(snapshot), { lineWidth: 0, aliasDuplicateObjects: false })
}

/**
 * canonicalJsonPretty of `envelope` with `items` in its "items" (an empty array there), each
 * item's text rendered once for all the documents and exports it appears in.
 */
export function renderWithItems(envelope: Record<string, unknown> & { items: [] }, items: readonly Item[]): string {
  const text = canonicalJsonPretty(envelope)
  if (items.length === 0) return text
  // Concatenated, not replace()d: the items' text (17 MB at 10k) is then copied once, when written.
  const at = text.indexOf(EMPTY_ITEMS) + EMPTY_ITEMS.length - 1
  return text.slice(0, at) + '\n' + items.map(itemAsElement).join(',\n') + '\n  ' + text.slice(at)
}

export function renderItem(item: Item): string {
  return canonicalJsonPretty(item)
}

/**
 * perResource layouts (git, s3): an item's own file under `dir`, at a path made of its escaped
 * identity, so `git log -- <file>` or an object's key is that item's history.
 */
export function itemPath(dir: string, item: Item): string {
  return [
    dir,
    escapePathSegment(item.target.namespace),
    escapePathSegment(item.target.name),
    escapePathSegment(item.group || 'core'),
    escapePathSegment(item.kind),
    escapePathSegment(item.namespace || '_cluster'),
    `${escapePathSegment(item.name)}.json`,
  ].join('/')
}

/**
 * The items of a document, or undefined when the text is not a snapshot document. Callers
 * treat undefined as "holds nothing": a corrupt file is overwritten, never a reason to stop.
 */
export function parseSnapshotItems(text: string, format: DocumentFormat = 'json'): Item[] | undefined {
  return parseSnapshotDocument(text, format)?.items
}

/** parseSnapshotItems, plus the rest of the document (checksum, counts) for callers that compare it. */
export function parseSnapshotDocument(
  text: string,
  format: DocumentFormat = 'json',
): { items: Item[]; envelope: Record<string, unknown> } | undefined {
  let value: unknown
  try {
    value = format === 'json' ? JSON.parse(text) : YAML.parse(text)
  } catch {
    return undefined
  }
  if (!isRecord(value) || !Array.isArray(value.items)) return undefined
  const items: Item[] = []
  for (const item of value.items) {
    if (!isItem(item)) return undefined
    items.push(item)
  }
  return { items, envelope: { ...value, items: undefined } }
}

export function parseItem(text: string): Item | undefined {
  try {
    const value: unknown = JSON.parse(text)
    return isItem(value) ? value : undefined
  } catch {
    return undefined
  }
}

/** What a sink holds, in the shape diffItems compares against. */
export function heldFromItems(items: Iterable<Item>): Map<string, HeldItem> {
  const held = new Map<string, HeldItem>()
  for (const item of items) held.set(itemKey(item), { hash: itemHash(item) })
  return held
}

/**
 * renderPath, plus the checks a document needs: the path names a file below root (not root
 * itself), and template errors are configuration errors, since retrying cannot fix them.
 */
export function renderDocumentPath(sink: SinkLabel, root: string, template: string, values: TemplateValues): string {
  let full: string
  try {
    full = renderPath(root, template, values)
  } catch (err) {
    throw configError(sink, (err as Error).message)
  }
  if (full === path.resolve(root) || /[\\/]$/.test(template)) {
    throw configError(sink, `path template "${template}" must name a file`)
  }
  return full
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

function isItem(value: unknown): value is Item {
  if (!isRecord(value)) return false
  for (const f of ['group', 'version', 'kind', 'namespace', 'name', 'uid'] as const) {
    if (typeof value[f] !== 'string') return false
  }
  const target = value.target
  return (
    isRecord(target) &&
    typeof target.namespace === 'string' &&
    typeof target.name === 'string' &&
    isRecord(value.attributes)
  )
}
