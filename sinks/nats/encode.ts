import { itemHash, itemKey, itemsChecksum, sha256 } from '../../api/canonical.js'
import type { Item, ObjectRef, Snapshot } from '../../api/types.js'
import type { HeldItem, ItemDiff } from '../diff.js'
import { escapeSubjectToken } from '../escape.js'
import { resultOf } from '../result.js'
import type { WriteResult } from '../sink.js'

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

export interface OutgoingMessage {
  subject: string
  payload: string
  /** JetStream Nats-Msg-Id: the server drops a repeat inside the stream's duplicate window. */
  msgID: string
  /** Kollect-Checksum header: the snapshot this message belongs to. */
  checksum: string
}

/** What the KV bucket holds for an inventory under `<token>.snapshot`. */
export interface HeldSnapshot {
  checksum: string
  itemCount: number
}

/** The last-published state of one inventory, as read back from the KV bucket. */
export interface InventoryState {
  /**
   * KV revision of the `<token>.snapshot` key (a put or a delete marker), 0 if it never existed.
   * It changes with every completed export or removal and only then.
   */
  revision: number
  snapshot?: HeldSnapshot
  items: Map<string, HeldItem>
}

/** One stored KV entry as the service reads it. */
export interface StateEntry {
  key: string
  revision: number
  operation: 'PUT' | 'DEL' | 'PURGE'
  value: Uint8Array
}

/** The checksum of "holds nothing", carried by a tombstone. */
export const EMPTY_CHECKSUM = itemsChecksum([])

export interface InventoryAddress {
  cluster: string
  inventory: ObjectRef
}

export function subjectFor(prefix: string, at: InventoryAddress, type: ItemEventType | 'snapshot'): string {
  return [
    prefix,
    escapeSubjectToken(at.cluster),
    escapeSubjectToken(at.inventory.namespace),
    escapeSubjectToken(at.inventory.name),
    type,
  ].join('.')
}

/**
 * KV key prefix of an inventory. A hash, because KV keys allow fewer characters than subjects
 * (no '%'); the stream and subject are part of it since two sinks may share one server.
 */
export function inventoryToken(stream: string, subject: string, at: InventoryAddress): string {
  return sha256(JSON.stringify([stream, subject, at.cluster, at.inventory.namespace, at.inventory.name])).slice(0, 32)
}

export function itemStateKey(token: string, key: string): string {
  return `${token}.i.${sha256(key).slice(0, 40)}`
}

export function snapshotStateKey(token: string): string {
  return `${token}.snapshot`
}

export function itemsStateFilter(token: string): string {
  return `${token}.i.>`
}

export function inventoryStateFilter(token: string): string {
  return `${token}.>`
}

const decoder = new TextDecoder()

/** Rebuild the held state from KV entries, delivered in stream order (a later entry wins). */
export function decodeState(token: string, entries: readonly StateEntry[]): InventoryState {
  const state: InventoryState = { revision: 0, items: new Map() }
  const itemKeyOf = new Map<string, string>()
  const snapshotKey = snapshotStateKey(token)
  for (const entry of entries) {
    if (entry.key === snapshotKey) {
      state.revision = entry.revision
      state.snapshot = entry.operation === 'PUT' ? (JSON.parse(decoder.decode(entry.value)) as HeldSnapshot) : undefined
      continue
    }
    const previous = itemKeyOf.get(entry.key)
    if (previous !== undefined) state.items.delete(previous)
    if (entry.operation !== 'PUT') continue
    const item = JSON.parse(decoder.decode(entry.value)) as Item
    const key = itemKey(item)
    itemKeyOf.set(entry.key, key)
    state.items.set(key, { hash: itemHash(item), item })
  }
  return state
}

export function encodeHeldSnapshot(snapshot: Pick<Snapshot, 'checksum' | 'itemCount'>): string {
  const held: HeldSnapshot = { checksum: snapshot.checksum, itemCount: snapshot.itemCount }
  return JSON.stringify(held)
}

/** One export: from what the stream last said (previousChecksum at revision) to checksum. */
export interface Transition extends InventoryAddress {
  previousChecksum: string | null
  checksum: string
  revision: number
}

/**
 * The message id of one event of a transition. A retry of the same export (same revision, same
 * checksums) gets the same ids and is dropped by the server; any later export, even one that
 * repeats an earlier transition (A→B→A→B, or delete and re-create), starts from a new revision.
 */
export function messageId(t: Transition, key: string, type: string): string {
  return sha256(`${t.revision}:${t.previousChecksum ?? ''}>${t.checksum}|${key}|${type}`)
}

function itemEvent(prefix: string, t: Transition, type: ItemEventType, key: string, before?: Item, after?: Item): OutgoingMessage {
  const event: ItemEvent = {
    type,
    cluster: t.cluster,
    inventory: t.inventory,
    key,
    checksum: t.checksum,
    previousChecksum: t.previousChecksum,
    ...(before ? { before } : {}),
    ...(after ? { after } : {}),
  }
  return { subject: subjectFor(prefix, t, type), payload: JSON.stringify(event), msgID: messageId(t, key, type), checksum: t.checksum }
}

function marker(prefix: string, t: Transition, type: MarkerType, counts: WriteResult, itemCount: number): OutgoingMessage {
  const body: SnapshotMarker = {
    type,
    cluster: t.cluster,
    inventory: t.inventory,
    checksum: t.checksum,
    previousChecksum: t.previousChecksum,
    itemCount,
    ...counts,
  }
  return { subject: subjectFor(prefix, t, 'snapshot'), payload: JSON.stringify(body), msgID: messageId(t, '', type), checksum: t.checksum }
}

export interface Encoded {
  events: OutgoingMessage[]
  marker: OutgoingMessage
}

export function encodeExport(prefix: string, t: Transition, diff: ItemDiff, itemCount: number): Encoded {
  const events: OutgoingMessage[] = []
  for (const after of diff.added) events.push(itemEvent(prefix, t, 'added', itemKey(after), undefined, after))
  for (const { before, after } of diff.changed) events.push(itemEvent(prefix, t, 'changed', itemKey(after), before, after))
  for (const { key, before } of diff.removed) events.push(itemEvent(prefix, t, 'removed', key, before))
  return { events, marker: marker(prefix, t, 'snapshot', resultOf(diff), itemCount) }
}

/** deletionPolicy Delete: every held item is removed, then a tombstone on the snapshot subject. */
export function encodeRemoval(prefix: string, t: Transition, held: InventoryState): Encoded {
  const events = [...held.items].map(([key, { item }]) => itemEvent(prefix, t, 'removed', key, item))
  return { events, marker: marker(prefix, t, 'tombstone', { added: 0, changed: 0, removed: events.length }, 0) }
}

/** KV puts (added and changed items) and the KV keys of removed items. */
export function stateUpdates(token: string, diff: ItemDiff): { puts: [string, string][]; removals: string[] } {
  const puts: [string, string][] = []
  for (const item of diff.added) puts.push([itemStateKey(token, itemKey(item)), JSON.stringify(item)])
  for (const { after } of diff.changed) puts.push([itemStateKey(token, itemKey(after)), JSON.stringify(after)])
  return { puts, removals: diff.removed.map(({ key }) => itemStateKey(token, key)) }
}

