import { itemHash, itemKey, sha256 } from '../../api/canonical.js'
import type { Item } from '../../api/types.js'
import type { HeldItem, ItemDiff } from '../diff.js'
import { escapeSubjectToken } from '../escape.js'
import { itemEventBody, markerBody, type InventoryAddress, type ItemEventType, type MarkerType } from '../events.js'
import { resultOf } from '../result.js'
import type { WriteResult } from '../sink.js'

// Pure: the messages an export publishes (item events and the snapshot marker, in the format of
// ../events.ts), their subjects and their dedupe ids. What the last export left behind is read in state.ts.

export interface OutgoingMessage {
  subject: string
  payload: string
  /** JetStream Nats-Msg-Id: the server drops a repeat inside the stream's duplicate window. */
  msgID: string
  /** Kollect-Checksum header: the snapshot this message belongs to. */
  checksum: string
}

/** `type` '*' is the filter for every message of the inventory. */
export function subjectFor(prefix: string, at: InventoryAddress, type: ItemEventType | 'snapshot' | '*'): string {
  return [
    prefix,
    escapeSubjectToken(at.cluster),
    escapeSubjectToken(at.inventory.namespace),
    escapeSubjectToken(at.inventory.name),
    type,
  ].join('.')
}

/** One export: from what the stream last said (previousChecksum) to checksum. */
export interface Transition extends InventoryAddress {
  /** inventoryToken: ids of two inventories on one stream never meet. */
  token: string
  previousChecksum: string | null
  checksum: string
  revision: number
  markerSequence: number
  positions: ReadonlyMap<string, number>
}

/**
 * The message id of one item event: the item change itself (key, type, before and after hash),
 * placed by the recorded export it follows (KV revision) and by the item's last unrecorded event
 * on the stream. Not the snapshot: an interrupted export retried with a different snapshot
 * re-publishes its changes under the same ids, and the server drops them. A later repeat of the
 * same change (A→B→A→B) follows another event or export, so it gets a new id.
 */
export function itemMessageId(t: Transition, type: ItemEventType, key: string, before?: Item, after?: Item): string {
  const at = t.positions.get(key) ?? 0
  const hashes = `${before ? itemHash(before) : ''}>${after ? itemHash(after) : ''}`
  return sha256(`${t.token}|${t.revision}:${at}|${key}|${type}|${hashes}`)
}

/** The marker's id: the snapshot transition, placed after the previous marker on the stream. */
export function markerMessageId(t: Transition, type: MarkerType): string {
  return sha256(`${t.token}|${t.revision}:${t.markerSequence}|${t.previousChecksum ?? ''}>${t.checksum}|${type}`)
}

function itemEvent(prefix: string, t: Transition, type: ItemEventType, key: string, before?: Item, after?: Item): OutgoingMessage {
  return {
    subject: subjectFor(prefix, t, type),
    payload: JSON.stringify(itemEventBody(t, t, type, key, before, after)),
    msgID: itemMessageId(t, type, key, before, after),
    checksum: t.checksum,
  }
}

function marker(prefix: string, t: Transition, type: MarkerType, counts: WriteResult, itemCount: number): OutgoingMessage {
  const body = markerBody(t, t, type, itemCount, counts)
  return { subject: subjectFor(prefix, t, 'snapshot'), payload: JSON.stringify(body), msgID: markerMessageId(t, type), checksum: t.checksum }
}

export interface Encoded {
  events: OutgoingMessage[]
  marker: OutgoingMessage
}

/** The marker counts every item event since the previous marker: `before` (unrecorded ones) plus `diff`. */
export function encodeExport(prefix: string, t: Transition, diff: ItemDiff, itemCount: number, before: WriteResult): Encoded {
  const events: OutgoingMessage[] = []
  for (const after of diff.added) events.push(itemEvent(prefix, t, 'added', itemKey(after), undefined, after))
  for (const { before, after } of diff.changed) events.push(itemEvent(prefix, t, 'changed', itemKey(after), before, after))
  for (const { key, before } of diff.removed) events.push(itemEvent(prefix, t, 'removed', key, before))
  return { events, marker: marker(prefix, t, 'snapshot', sumResults(before, resultOf(diff)), itemCount) }
}

/** deletionPolicy Delete: every held item is removed, then a tombstone on the snapshot subject. */
/** `held`: the items consumers have seen and the item events since the last marker (an InventoryState). */
export function encodeRemoval(prefix: string, t: Transition, held: { items: ReadonlyMap<string, HeldItem>; sinceMarker: WriteResult }): Encoded {
  const events = [...held.items].map(([key, { item }]) => itemEvent(prefix, t, 'removed', key, item))
  const counts = sumResults(held.sinceMarker, { added: 0, changed: 0, removed: events.length })
  return { events, marker: marker(prefix, t, 'tombstone', counts, 0) }
}

function sumResults(a: WriteResult, b: WriteResult): WriteResult {
  return { added: a.added + b.added, changed: a.changed + b.changed, removed: a.removed + b.removed }
}