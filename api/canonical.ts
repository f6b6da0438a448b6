import { hash as oneShotHash } from 'node:crypto'
import { SCHEMA_VERSION, type Item, type ObjectRef, type Snapshot } from './types.js'

// Canonical JSON: keys sorted by code unit, no whitespace. Byte-identical for equal values,
// which is what checksums, golden files and Metacontroller's status comparison need.
export function canonicalJson(value: unknown): string {
  // The hooks build items with their keys in order, so most items take the native path.
  return (inOrder(value) ? JSON.stringify(value) : writeCanonical(value)) ?? 'null'
}

/** True when every object's keys already come sorted: then JSON.stringify writes canonical JSON. */
function inOrder(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return true
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!inOrder(value[i])) return false
    return true
  }
  // toJSON output is written as it is on both paths.
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return true
  const keys = Object.keys(value)
  for (let i = 0; i < keys.length; i++) {
    if (i > 0 && (keys[i - 1] as string) > (keys[i] as string)) return false
    if (!inOrder((value as Record<string, unknown>)[keys[i] as string])) return false
  }
  return true
}

// Serialises in one pass without building sorted copies: checksums of 10k items sit on the hook path.
function writeCanonical(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object') return JSON.stringify(value)
  if (Array.isArray(value)) {
    let out = '['
    for (let i = 0; i < value.length; i++) out += (i ? ',' : '') + (writeCanonical(value[i]) ?? 'null')
    return out + ']'
  }
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return JSON.stringify(value)
  const keys = Object.keys(value)
  // Objects from Go (labels, annotations) and items' fixed shapes mostly come sorted already.
  for (let i = 1; i < keys.length; i++) {
    if ((keys[i - 1] as string) > (keys[i] as string)) {
      keys.sort()
      break
    }
  }
  let out = '{'
  let first = true
  for (const k of keys) {
    const v = writeCanonical((value as Record<string, unknown>)[k])
    if (v === undefined) continue
    out += (first ? '' : ',') + quotedKey(k) + ':' + v
    first = false
  }
  return out + '}'
}

/** JSON.stringify of strings that repeat, remembered for the first `bound` distinct ones. */
function quoter(bound: number): (text: string) => string {
  const quotedTexts = new Map<string, string>()
  return (text) => {
    let q = quotedTexts.get(text)
    if (q === undefined) {
      q = JSON.stringify(text)
      if (quotedTexts.size < bound) quotedTexts.set(text, q)
    }
    return q
  }
}

// Keys repeat across items (identity fields, attribute names, label keys): quoted once each, up to a bound.
const quotedKey = quoter(4096)

/** Pretty canonical JSON for files people diff: one value per line, stable order. */
export function canonicalJsonPretty(value: unknown): string {
  return JSON.stringify(sortKeys(value), null, 2) + '\n'
}

export function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys)
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {}
    for (const key of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[key]
      // defineProperty: a "__proto__" key is data and must survive into the document.
      if (v !== undefined) Object.defineProperty(out, key, { value: sortKeys(v), enumerable: true, writable: true, configurable: true })
    }
    return out
  }
  return value
}

// The one-shot form: a Hash object per item cost about four times as much on the hook path.
export function sha256(text: string): string {
  return oneShotHash('sha256', text, 'hex')
}

/** Stable identity of an item inside an inventory: the source target plus the object uid. */
export function itemKey(item: Pick<Item, 'target' | 'uid'>): string {
  return `${item.target.namespace}/${item.target.name}/${item.uid}`
}

// Items are immutable once extracted. The exporter keeps an unchanged item's object from one
// report to the next (see seedItemHash), so a hash computed once serves every later export and
// every sink.
const hashes = new WeakMap<Item, string>()

/** SHA-256 of the item's canonical JSON; sinks compare it to decide "changed". */
export function itemHash(item: Item): string {
  let h = hashes.get(item)
  if (h === undefined) {
    h = sha256(canonicalJson(item))
    hashes.set(item, h)
  }
  return h
}

/**
 * The canonical JSON of an item whose attributes' canonical JSON is at hand (the hooks wrote it
 * for the per-item size bound): "attributes" sorts first among an item's keys, so it is that text
 * followed by the identity's, and the attributes are not serialised twice.
 */
export function itemJsonWithAttributes(item: Item, attributesJson: string): string {
  return '{"attributes":' + attributesJson + ',' + identityJson(item).slice(1)
}

/** itemHash from the item's canonical JSON (itemJsonWithAttributes()), remembered for the item. */
export function itemHashOfJson(item: Item, json: string): string {
  const h = sha256(json)
  hashes.set(item, h)
  return h
}

/** The item without its attributes as canonical JSON: written directly when it has exactly Item's fields, all strings. */
function identityJson(item: Item): string {
  const { group, kind, name, namespace, target, uid, version } = item
  if (typeof group !== 'string' || typeof kind !== 'string' || typeof name !== 'string' || typeof namespace !== 'string' ||
    typeof uid !== 'string' || typeof version !== 'string' ||
    typeof target?.name !== 'string' || typeof target.namespace !== 'string' || Object.keys(target).length !== 2 || Object.keys(item).length !== 8) {
    const { attributes: _attributes, ...identity } = item
    return canonicalJson(identity)
  }
  return '{"group":' + quoted(group) + ',"kind":' + quoted(kind) + ',"name":' + JSON.stringify(name) + ',"namespace":' + quoted(namespace) +
    ',"target":{"name":' + quoted(target.name) + ',"namespace":' + quoted(target.namespace) + '}' +
    ',"uid":' + JSON.stringify(uid) + ',"version":' + quoted(version) + '}'
}

// Group, kind, version and the target repeat on every item of a sync: quoted once each, up to a bound.
const quoted = quoter(4096)

/** Record a hash computed elsewhere (the hooks computed it while extracting). */
export function seedItemHash(item: Item, hash: string): void {
  hashes.set(item, hash)
}

const IDENTITY_FIELDS = ['group', 'version', 'kind', 'namespace', 'name', 'uid'] as const

export function compareItems(a: Item, b: Item): number {
  for (const f of IDENTITY_FIELDS) {
    if (a[f] !== b[f]) return a[f] < b[f] ? -1 : 1
  }
  if (a.target.namespace !== b.target.namespace) return a.target.namespace < b.target.namespace ? -1 : 1
  if (a.target.name !== b.target.name) return a.target.name < b.target.name ? -1 : 1
  return 0
}

/**
 * The snapshot checksum: SHA-256 over the items' own hashes (itemHash), one per line, in item
 * order. Built from per-item hashes, a 1-item change costs one item's hashing, not ten thousand.
 */
export function itemsChecksum(sortedItems: readonly Item[]): string {
  const lines = new Array<string>(sortedItems.length)
  for (let i = 0; i < sortedItems.length; i++) lines[i] = itemHash(sortedItems[i] as Item)
  return checksumOfHashes(lines)
}

/** itemsChecksum from the items' hashes, in item order. */
export function checksumOfHashes(hashes: readonly string[]): string {
  // One string and a one-shot hash: 10,000 update() calls cost several times as much.
  return sha256(hashes.join('\n'))
}

export function buildSnapshot(inventory: ObjectRef, cluster: string, items: readonly Item[]): Snapshot {
  const sorted = [...items].sort(compareItems)
  return {
    schemaVersion: SCHEMA_VERSION,
    inventory: { namespace: inventory.namespace, name: inventory.name },
    cluster,
    itemCount: sorted.length,
    checksum: itemsChecksum(sorted),
    items: sorted,
  }
}

export function refKey(ref: ObjectRef): string {
  return `${ref.namespace}/${ref.name}`
}
