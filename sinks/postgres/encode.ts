import { canonicalJson, itemHash, itemKey } from '../../api/canonical.js'
import type { Item, JsonObject, Snapshot } from '../../api/types.js'
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

/** A row as stored: every column Kollect writes from the item, and whether its export stamp is one of ours. */
export interface StoredRow extends HeldRow {
  api_group: string
  api_version: string
  kind: string
  namespace: string
  name: string
  attributes: JsonObject
  stamped: boolean
}

/** The inventory's latest snapshot row: what the table says it holds. */
export interface SnapshotHeader {
  checksum: string
  item_count: number
  /** The fencing token of the export's writer (leader election), null without. */
  lease: string | null
  epoch: string | null
}

/** What the table holds for an inventory: hashes for diffItems, key columns for deletes. */
export interface HeldState {
  hashes: Map<string, HeldItem>
  keys: Map<string, [string, string, string]>
}

// Held in place of a hash for a row whose hash column or export stamp was edited: it equals no
// item's hash, so diffItems counts the row as changed and the write puts it back.
const TAMPERED = 'tampered'

export function inventoryParams(snapshot: Pick<Snapshot, 'cluster' | 'inventory'>): InventoryParams {
  return { cluster: snapshot.cluster, namespace: snapshot.inventory.namespace, name: snapshot.inventory.name }
}

export function emptyHeld(): HeldState {
  return { hashes: new Map(), keys: new Map() }
}

/** Held state from the content_hash column alone: what a write trusts when nothing hints at drift. */
export function heldFromRows(rows: readonly HeldRow[]): HeldState {
  const held = emptyHeld()
  for (const row of rows) addHeld(held, row, row.content_hash)
  return held
}

/**
 * Adds stored rows by what they hold, not by what their hash column claims: each row's item is
 * rebuilt from its columns and hashed. Jsonb reorders keys and reformats numbers, so the
 * attributes are hashed from their parsed value in canonical JSON, as the exporter hashed them.
 */
export function addStoredRows(held: HeldState, rows: readonly StoredRow[]): void {
  for (const row of rows) {
    const hash = itemHash(storedItem(row))
    addHeld(held, row, hash === row.content_hash && row.stamped ? hash : TAMPERED)
  }
}

function storedItem(row: StoredRow): Item {
  return {
    group: row.api_group,
    version: row.api_version,
    kind: row.kind,
    namespace: row.namespace,
    name: row.name,
    uid: row.uid,
    target: { namespace: row.target_namespace, name: row.target_name },
    attributes: row.attributes,
  }
}

function addHeld(held: HeldState, row: HeldRow, hash: string): void {
  const key = itemKey({ target: { namespace: row.target_namespace, name: row.target_name }, uid: row.uid })
  held.hashes.set(key, { hash })
  held.keys.set(key, [row.target_namespace, row.target_name, row.uid])
}

/** The snapshot row says the table holds this snapshot. */
export function headerInStep(header: Pick<SnapshotHeader, 'checksum' | 'item_count'> | undefined, snapshot: Pick<Snapshot, 'checksum' | 'itemCount'>): boolean {
  return header !== undefined && header.checksum === snapshot.checksum && header.item_count === snapshot.itemCount
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

