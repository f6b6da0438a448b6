import { createHash } from 'node:crypto'
import { SCHEMA_VERSION, type Item, type ObjectRef, type Snapshot } from './types.js'

// Canonical JSON: keys sorted by code unit, no whitespace. Byte-identical for equal values,
// which is what checksums, golden files and Metacontroller's status comparison need.
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value))
}

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
      if (v !== undefined) out[key] = sortKeys(v)
    }
    return out
  }
  return value
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

/** Stable identity of an item inside an inventory: the source target plus the object uid. */
export function itemKey(item: Pick<Item, 'target' | 'uid'>): string {
  return `${item.target.namespace}/${item.target.name}/${item.uid}`
}

/** Hash of everything an item carries; sinks compare it to decide "changed". */
export function itemHash(item: Item): string {
  return sha256(canonicalJson(item))
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

export function itemsChecksum(sortedItems: readonly Item[]): string {
  return sha256(canonicalJson(sortedItems))
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
