import { itemsChecksum } from '../api/canonical.js'
import type { Item, ObjectRef } from '../api/types.js'
import type { WriteResult } from './sink.js'

// The change events and snapshot markers every event sink (nats, kafka) publishes and the hub
// reads: one format, so a consumer reads them alike whichever sink carried them. How a sink
// addresses and dedupes them (subjects and message ids, keys and partitions) is its own.

/** One inventory of one cluster: what an event or a marker is about. */
export interface InventoryAddress {
  cluster: string
  inventory: ObjectRef
}

export type ItemEventType = 'added' | 'changed' | 'removed'
export type MarkerType = 'snapshot' | 'tombstone'

export interface ItemEvent {
  type: ItemEventType
  cluster: string
  inventory: ObjectRef
  key: string
  checksum: string
  previousChecksum: string | null
  before?: Item
  after?: Item
}

export interface SnapshotMarker {
  type: MarkerType
  cluster: string
  inventory: ObjectRef
  checksum: string
  previousChecksum: string | null
  itemCount: number
  added: number
  changed: number
  removed: number
}

/** The checksum of "holds nothing", carried by a tombstone. */
export const EMPTY_CHECKSUM = itemsChecksum([])

/** The snapshot an event belongs to, and the one consumers were told of before it. */
export interface EventChecksums {
  checksum: string
  previousChecksum: string | null
}

// Fields are picked, never spread: callers pass a snapshot or a transition as the address, and
// the body's key order is part of the bytes consumers dedupe and compare.
export function itemEventBody(at: InventoryAddress, of: EventChecksums, type: ItemEventType, key: string, before?: Item, after?: Item): ItemEvent {
  return {
    type,
    cluster: at.cluster,
    inventory: at.inventory,
    key,
    checksum: of.checksum,
    previousChecksum: of.previousChecksum,
    ...(before ? { before } : {}),
    ...(after ? { after } : {}),
  }
}

/** `counts`: the item events since the previous marker. */
export function markerBody(at: InventoryAddress, of: EventChecksums, type: MarkerType, itemCount: number, counts: WriteResult): SnapshotMarker {
  return {
    type,
    cluster: at.cluster,
    inventory: at.inventory,
    checksum: of.checksum,
    previousChecksum: of.previousChecksum,
    itemCount,
    added: counts.added,
    changed: counts.changed,
    removed: counts.removed,
  }
}
