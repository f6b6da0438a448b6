import { itemHash, itemKey, sha256 } from '../../api/canonical.js'
import type { Item } from '../../api/types.js'
import type { HeldItem, ItemDiff } from '../diff.js'
import type { InventoryAddress, ItemEvent, SnapshotMarker } from '../events.js'
import { parseToken, type FencingToken } from '../fence.js'
import { emptyResult, type WriteResult } from '../sink.js'
import type { Transition } from './encode.js'

// Pure: what an inventory's last export left behind (the KV bucket's record and the stream after
// it), and the KV keys and values that record the next one.

/** What the KV bucket holds for an inventory under `<token>.snapshot`. */
export interface HeldSnapshot {
  checksum: string
  itemCount: number
  /** Stream sequence of this snapshot's marker; absent in records written before it was kept. */
  sequence?: number
  /** Leader election: the fencing token of the writer that recorded it. */
  fencing?: FencingToken
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
  /** The fencing token of the last recorded export (leader election): a lower epoch may not write. */
  fencing?: FencingToken
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
      state.fencing = parseToken(state.snapshot?.fencing)
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
  return JSON.stringify({ checksum: held.checksum, itemCount: held.itemCount, sequence: held.sequence, fencing: held.fencing })
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

/** KV puts (added and changed items) and the KV keys of removed items. */
export function stateUpdates(token: string, diff: ItemDiff): { puts: [string, string][]; removals: string[] } {
  const puts: [string, string][] = []
  for (const item of diff.added) puts.push([itemStateKey(token, itemKey(item)), JSON.stringify(item)])
  for (const { after } of diff.changed) puts.push([itemStateKey(token, itemKey(after)), JSON.stringify(after)])
  return { puts, removals: diff.removed.map(({ key }) => itemStateKey(token, key)) }
}
