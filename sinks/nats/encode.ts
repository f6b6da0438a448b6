import { itemHash, itemKey, itemsChecksum, sha256 } from '../../api/canonical.js'
import type { Item, ObjectRef } from '../../api/types.js'
import type { HeldItem, ItemDiff } from '../diff.js'
import { escapeSubjectToken } from '../escape.js'
import { resultOf } from '../result.js'
import { emptyResult, type WriteResult } from '../sink.js'

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
  /** Stream sequence of this snapshot's marker; absent in records written before it was kept. */
  sequence?: number
}

/**
 * The last-published state of one inventory: the KV bucket's record, plus whatever the stream
 * holds after the recorded marker (an export interrupted between publishing and recording).
 */
export interface InventoryState {
  /**
   * KV revision of the `<token>.snapshot` key (a put or a delete marker), 0 if it never existed.
   * It changes with every completed export or removal and only then.
   */
  revision: number
  /** The last marker on the stream: what consumers were last told the inventory is. */
  snapshot?: HeldSnapshot
  /** Every item as consumers have seen it: the KV's items with the unrecorded events applied. */
  items: Map<string, HeldItem>
  /** The items as the KV bucket holds them; the same map as `items` unless `unrecorded`. */
  recorded: Map<string, HeldItem>
  /** The stream holds messages of this inventory that the KV bucket does not record yet. */
  unrecorded: boolean
  /** Stream sequence of the last marker (0 if none): item events after it belong to the next marker. */
  markerSequence: number
  /** Per item key, the stream sequence of its last unrecorded event. */
  positions: Map<string, number>
  /** Item events on the stream after the last marker, counted into the next one. */
  sinceMarker: WriteResult
}

/** One message of an inventory read back from the stream. */
export interface PublishedMessage {
  seq: number
  body: ItemEvent | SnapshotMarker
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

/** Rebuild the recorded state from KV entries, delivered in stream order (a later entry wins). */
export function decodeState(token: string, entries: readonly StateEntry[]): InventoryState {
  const items = new Map<string, HeldItem>()
  const state: InventoryState = { ...emptyProgress(), items, recorded: items }
  const itemKeyOf = new Map<string, string>()
  const snapshotKey = snapshotStateKey(token)
  for (const entry of entries) {
    if (entry.key === snapshotKey) {
      state.revision = entry.revision
      state.snapshot = entry.operation === 'PUT' ? (JSON.parse(decoder.decode(entry.value)) as HeldSnapshot) : undefined
      continue
    }
    const previous = itemKeyOf.get(entry.key)
    if (previous !== undefined) items.delete(previous)
    if (entry.operation !== 'PUT') continue
    const item = JSON.parse(decoder.decode(entry.value)) as Item
    const key = itemKey(item)
    itemKeyOf.set(entry.key, key)
    items.set(key, { hash: itemHash(item), item })
  }
  state.markerSequence = state.snapshot?.sequence ?? 0
  return state
}

function emptyProgress(): Pick<InventoryState, 'revision' | 'unrecorded' | 'markerSequence' | 'positions' | 'sinceMarker'> {
  return { revision: 0, unrecorded: false, markerSequence: 0, positions: new Map(), sinceMarker: emptyResult() }
}

/**
 * The stream sequence to replay after: the recorded marker's. With no record (a first export, or
 * the first after a removal) the inventory's whole history on the stream, whose earlier lives end
 * in tombstones. A record from before markers were placed: none, the bucket is all we know.
 */
export function replayFrom(state: InventoryState): number | undefined {
  if (state.snapshot === undefined) return 0
  return state.snapshot.sequence
}

function isMarker(body: ItemEvent | SnapshotMarker): body is SnapshotMarker {
  return body.type === 'snapshot' || body.type === 'tombstone'
}

/**
 * Apply what the stream holds after the recorded marker: the events and marker of an export that
 * was published but not recorded. The result is what consumers have seen, so the next diff
 * publishes only what they have not.
 */
export function replay(recorded: InventoryState, messages: readonly PublishedMessage[]): InventoryState {
  if (messages.length === 0) return recorded
  const items = new Map(recorded.items)
  const state: InventoryState = { ...recorded, items, unrecorded: true, positions: new Map(), sinceMarker: emptyResult() }
  for (const { seq, body } of messages) {
    if (isMarker(body)) {
      state.snapshot = body.type === 'snapshot' ? { checksum: body.checksum, itemCount: body.itemCount, sequence: seq } : undefined
      if (body.type === 'tombstone') items.clear()
      state.markerSequence = seq
      state.sinceMarker = emptyResult()
      continue
    }
    if (body.after) items.set(body.key, { hash: itemHash(body.after), item: body.after })
    else items.delete(body.key)
    state.positions.set(body.key, seq)
    state.sinceMarker[body.type] += 1
  }
  return state
}

export function encodeHeldSnapshot(held: HeldSnapshot): string {
  return JSON.stringify({ checksum: held.checksum, itemCount: held.itemCount, sequence: held.sequence })
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

/** A transition from what `state` says consumers have seen. */
export function transitionFrom(token: string, at: InventoryAddress, state: InventoryState, checksum: string): Transition {
  return {
    cluster: at.cluster,
    inventory: at.inventory,
    token,
    previousChecksum: state.snapshot?.checksum ?? null,
    checksum,
    revision: state.revision,
    markerSequence: state.markerSequence,
    positions: state.positions,
  }
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
  return {
    subject: subjectFor(prefix, t, type),
    payload: JSON.stringify(event),
    msgID: itemMessageId(t, type, key, before, after),
    checksum: t.checksum,
  }
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
export function encodeRemoval(prefix: string, t: Transition, held: InventoryState): Encoded {
  const events = [...held.items].map(([key, { item }]) => itemEvent(prefix, t, 'removed', key, item))
  const counts = sumResults(held.sinceMarker, { added: 0, changed: 0, removed: events.length })
  return { events, marker: marker(prefix, t, 'tombstone', counts, 0) }
}

function sumResults(a: WriteResult, b: WriteResult): WriteResult {
  return { added: a.added + b.added, changed: a.changed + b.changed, removed: a.removed + b.removed }
}

/** KV puts (added and changed items) and the KV keys of removed items. */
export function stateUpdates(token: string, diff: ItemDiff): { puts: [string, string][]; removals: string[] } {
  const puts: [string, string][] = []
  for (const item of diff.added) puts.push([itemStateKey(token, itemKey(item)), JSON.stringify(item)])
  for (const { after } of diff.changed) puts.push([itemStateKey(token, itemKey(after)), JSON.stringify(after)])
  return { puts, removals: diff.removed.map(({ key }) => itemStateKey(token, key)) }
}

