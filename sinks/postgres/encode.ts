import { canonicalJson, itemHash, itemKey } from '../../api/canonical.js'
import type { Item, Snapshot } from '../../api/types.js'
import type { HeldItem, ItemDiff } from '../diff.js'

/**
 * The per-item columns, in the order of the unnest() arrays. The inventory columns (cluster,
 * inventory_namespace, inventory_name) and the export columns (snapshot_checksum, exported_at)
 * are the same for every row of one export and travel as scalar parameters.
 */
export const ITEM_COLUMNS = [
  ['target_namespace', 'text'],
  ['target_name', 'text'],
  ['uid', 'text'],
  ['api_group', 'text'],
  ['api_version', 'text'],
  ['kind', 'text'],
  ['namespace', 'text'],
  ['name', 'text'],
  ['attributes', 'jsonb'],
  ['content_hash', 'text'],
] as const

/** The columns that identify an item inside an inventory (the tail of the primary key). */
export const KEY_COLUMNS = ['target_namespace', 'target_name', 'uid'] as const

export interface InventoryParams {
  cluster: string
  namespace: string
  name: string
}

export interface HeldRow {
  target_namespace: string
  target_name: string
  uid: string
  content_hash: string
}

/** What the table holds for an inventory: hashes for diffItems, key columns for deletes. */
export interface HeldState {
  hashes: Map<string, HeldItem>
  keys: Map<string, [string, string, string]>
}

export function inventoryParams(snapshot: Pick<Snapshot, 'cluster' | 'inventory'>): InventoryParams {
  return { cluster: snapshot.cluster, namespace: snapshot.inventory.namespace, name: snapshot.inventory.name }
}

export function heldFromRows(rows: readonly HeldRow[]): HeldState {
  const hashes = new Map<string, HeldItem>()
  const keys = new Map<string, [string, string, string]>()
  for (const row of rows) {
    const key = itemKey({ target: { namespace: row.target_namespace, name: row.target_name }, uid: row.uid })
    hashes.set(key, { hash: row.content_hash })
    keys.set(key, [row.target_namespace, row.target_name, row.uid])
  }
  return { hashes, keys }
}

/** The rows to upsert (added, then changed), as column arrays of at most chunkSize rows each. */
export function upsertChunks(diff: ItemDiff, chunkSize: number): string[][][] {
  const items: Item[] = [...diff.added, ...diff.changed.map((c) => c.after)]
  const chunks: string[][][] = []
  for (let start = 0; start < items.length; start += chunkSize) {
    const columns: string[][] = ITEM_COLUMNS.map(() => [])
    for (const item of items.slice(start, start + chunkSize)) {
      const row = [
        item.target.namespace,
        item.target.name,
        item.uid,
        item.group,
        item.version,
        item.kind,
        item.namespace,
        item.name,
        canonicalJson(item.attributes),
        diff.next.get(itemKey(item))?.hash ?? itemHash(item),
      ]
      row.forEach((value, i) => columns[i]!.push(value))
    }
    chunks.push(columns)
  }
  return chunks
}

/** Key column arrays of the removed items. */
export function removedKeys(diff: ItemDiff, held: HeldState): string[][] {
  const columns: string[][] = KEY_COLUMNS.map(() => [])
  for (const { key } of diff.removed) {
    const parts = held.keys.get(key)
    if (!parts) throw new Error(`removed item ${key} has no held row`)
    parts.forEach((value, i) => columns[i]!.push(value))
  }
  return columns
}

