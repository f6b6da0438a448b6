import { createHash } from 'node:crypto'
import { itemHash, itemKey, sha256 } from '../../api/canonical.js'
import type { Item, Snapshot } from '../../api/types.js'
import type { HeldItem, ItemDiff } from '../diff.js'
import { escapePathSegment } from '../escape.js'
import { EMPTY_CHECKSUM, itemEventBody, markerBody, type InventoryAddress, type ItemEventType } from '../events.js'
import { resultOf } from '../result.js'

// Pure: the records an export produces. The event bodies are ../events.ts's, as the NATS sink's,
// so a consumer reads both sinks alike; here are their keys, partitions and headers, and the state topic.

/** One record to produce; value null is a Kafka tombstone (compaction drops the key). */
export interface OutgoingRecord {
  topic: string
  partition: number
  key: string
  value: string | null
  headers: Record<string, string>
}

/** One record read back from the state topic. */
export interface StateRecord {
  key: string
  value: string | null
}

/** What consumers were last told about one inventory: recorded in the state topic in the same transaction. */
export interface HeldState {
  snapshot?: { checksum: string; itemCount: number }
  items: Map<string, HeldItem>
}

export interface Topics {
  topic: string
  stateTopic: string
  /** Partition count of the events topic. */
  partitions: number
}

export const HEADER_CHECKSUM = 'kollect-checksum'
export const HEADER_CLUSTER = 'kollect-cluster'
export const HEADER_INVENTORY = 'kollect-inventory'
export const HEADER_EVENT = 'kollect-event'

/** The marker's key, and the prefix of every item key of the inventory: escaped names, so no two inventories share one. */
export function inventoryKey(at: InventoryAddress): string {
  return [at.cluster, at.inventory.namespace, at.inventory.name].map(escapePathSegment).join('/')
}

/** An item event's key: the item's identity within its inventory, so a compacted topic keeps its latest state. */
export function itemEventKey(at: InventoryAddress, key: string): string {
  return `${inventoryKey(at)}/${key}`
}

/**
 * Every record of an inventory goes to one partition, chosen by the inventory: consumers see its
 * events and marker in order, and an item's key always lands on the same partition for compaction.
 */
export function partitionFor(at: InventoryAddress, partitions: number): number {
  const digest = createHash('sha256').update(inventoryKey(at)).digest()
  return digest.readUInt32BE(0) % Math.max(1, partitions)
}

/** Key prefix of an inventory in the state topic; the events topic is part of it, since two sinks may share a state topic. */
export function inventoryToken(topic: string, at: InventoryAddress): string {
  return sha256(JSON.stringify([topic, at.cluster, at.inventory.namespace, at.inventory.name])).slice(0, 32)
}

export function stateSnapshotKey(token: string): string {
  return `${token}|snapshot`
}

export function stateItemKey(token: string, key: string): string {
  return `${token}|i|${key}`
}

/**
 * Every inventory's held state from the state topic's records, in offset order (a later record
 * of a key wins; null deletes it). Records that do not parse are skipped: they are not ours.
 */
export function decodeStates(records: readonly StateRecord[]): Map<string, HeldState> {
  const latest = new Map<string, string | null>()
  for (const r of records) latest.set(r.key, r.value)
  const states = new Map<string, HeldState>()
  const stateOf = (token: string): HeldState => {
    let s = states.get(token)
    if (!s) states.set(token, (s = { items: new Map() }))
    return s
  }
  for (const [key, value] of latest) {
    if (value === null) continue
    const m = /^([0-9a-f]{32})\|(snapshot|i\|(.+))$/.exec(key)
    if (!m) continue
    try {
      const parsed: unknown = JSON.parse(value)
      if (m[2] === 'snapshot') {
        const { checksum, itemCount } = parsed as { checksum: string; itemCount: number }
        stateOf(m[1] as string).snapshot = { checksum, itemCount }
      } else {
        const item = parsed as Item
        stateOf(m[1] as string).items.set(m[3] as string, { hash: itemHash(item), item })
      }
    } catch {
      // not a record of this sink
    }
  }
  return states
}

function headers(at: InventoryAddress, checksum: string, event: string): Record<string, string> {
  return {
    [HEADER_CHECKSUM]: checksum,
    [HEADER_CLUSTER]: at.cluster,
    [HEADER_INVENTORY]: `${at.inventory.namespace}/${at.inventory.name}`,
    [HEADER_EVENT]: event,
  }
}

interface Context {
  topics: Topics
  at: InventoryAddress
  token: string
  partition: number
  checksum: string
  previousChecksum: string | null
}

function itemEvent(c: Context, type: ItemEventType, key: string, before?: Item, after?: Item): OutgoingRecord {
  const event = itemEventBody(c.at, c, type, key, before, after)
  return { topic: c.topics.topic, partition: c.partition, key: itemEventKey(c.at, key), value: JSON.stringify(event), headers: headers(c.at, c.checksum, type) }
}

function stateRecord(c: Context, key: string, value: string | null): OutgoingRecord {
  return { topic: c.topics.stateTopic, partition: 0, key, value, headers: {} }
}

function context(topics: Topics, at: InventoryAddress, held: HeldState, checksum: string): Context {
  const token = inventoryToken(topics.topic, at)
  return { topics, at, token, partition: partitionFor(at, topics.partitions), checksum, previousChecksum: held.snapshot?.checksum ?? null }
}

export interface Encoded {
  /** Item events, then the marker, then the state records: one transaction. */
  records: OutgoingRecord[]
  /** How many of them are item events. */
  events: number
  /** The state after the transaction commits. */
  next: HeldState
}

/** One export: an event per added, changed and removed item, the snapshot marker, and the state updates. */
export function encodeExport(topics: Topics, snapshot: Snapshot, held: HeldState, diff: ItemDiff): Encoded {
  const c = context(topics, snapshot, held, snapshot.checksum)
  const events: OutgoingRecord[] = []
  const state: OutgoingRecord[] = []
  for (const after of diff.added) {
    const key = itemKey(after)
    events.push(itemEvent(c, 'added', key, undefined, after))
    state.push(stateRecord(c, stateItemKey(c.token, key), JSON.stringify(after)))
  }
  for (const { before, after } of diff.changed) {
    const key = itemKey(after)
    events.push(itemEvent(c, 'changed', key, before, after))
    state.push(stateRecord(c, stateItemKey(c.token, key), JSON.stringify(after)))
  }
  for (const { key, before } of diff.removed) {
    events.push(itemEvent(c, 'removed', key, before))
    state.push(stateRecord(c, stateItemKey(c.token, key), null))
  }
  const marker = markerBody(c.at, c, 'snapshot', snapshot.itemCount, resultOf(diff))
  const recorded = { checksum: snapshot.checksum, itemCount: snapshot.itemCount }
  return {
    records: [
      ...events,
      { topic: topics.topic, partition: c.partition, key: inventoryKey(c.at), value: JSON.stringify(marker), headers: headers(c.at, c.checksum, 'snapshot') },
      ...state,
      stateRecord(c, stateSnapshotKey(c.token), JSON.stringify(recorded)),
    ],
    events: events.length,
    next: { snapshot: recorded, items: diff.next },
  }
}

/**
 * deletionPolicy Delete: a Kafka tombstone per held item and one for the marker key, so a
 * compacted topic forgets the inventory; the headers still say what happened (event "removed",
 * then "tombstone" with the checksum of the empty set). The state records go the same way.
 */
export function encodeRemoval(topics: Topics, at: InventoryAddress, held: HeldState): Encoded {
  const c = context(topics, at, held, EMPTY_CHECKSUM)
  const records: OutgoingRecord[] = []
  for (const key of held.items.keys()) {
    records.push({ topic: topics.topic, partition: c.partition, key: itemEventKey(at, key), value: null, headers: headers(at, c.checksum, 'removed') })
  }
  const events = records.length
  records.push({ topic: topics.topic, partition: c.partition, key: inventoryKey(at), value: null, headers: headers(at, c.checksum, 'tombstone') })
  for (const key of held.items.keys()) records.push(stateRecord(c, stateItemKey(c.token, key), null))
  records.push(stateRecord(c, stateSnapshotKey(c.token), null))
  return { records, events, next: { items: new Map() } }
}

/** One committed record as read back. */
export interface ReadRecord extends StateRecord {
  offset: bigint
  headers: Record<string, string>
}

/** Consecutive runs of records of at most about maxBytes each (one record alone may exceed it). */
export function chunks<T extends OutgoingRecord>(records: readonly T[], maxBytes: number): T[][] {
  const out: T[][] = []
  let current: T[] = []
  let size = 0
  for (const r of records) {
    const headerBytes = Object.entries(r.headers).reduce((n, [k, v]) => n + k.length + v.length, 0)
    const bytes = Buffer.byteLength(r.key) + (r.value === null ? 0 : Buffer.byteLength(r.value)) + 64 + headerBytes
    if (current.length > 0 && size + bytes > maxBytes) {
      out.push(current)
      current = []
      size = 0
    }
    current.push(r)
    size += bytes
  }
  if (current.length > 0) out.push(current)
  return out
}
