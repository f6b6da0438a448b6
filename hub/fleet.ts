import { buildSnapshot, itemHash, itemKey, refKey } from '../api/canonical.js'
import { clusterLabelProblem, isNamespaceName, isObjectName } from '../api/names.js'
import type { Item, ObjectRef, Snapshot } from '../api/types.js'
import type { ItemEvent, SnapshotMarker } from '../sinks/events.js'
import { escapePathSegment, escapeSubjectToken } from '../sinks/escape.js'
import { SharedStrings } from '../exporter/index.js'

// Pure: the hub's picture of each spoke inventory, rebuilt from the spokes' JetStream messages.
// No I/O here; hub/hub.ts feeds it messages and writes what it returns.

/** One spoke inventory as the hub holds it; `items` keep the stream sequence that set them. */
export interface HeldInventory {
  cluster: string
  inventory: ObjectRef
  /** A removed item stays as null, so a redelivered older event cannot bring it back. */
  items: Record<string, { seq: number; item: Item | null }>
  /** Stream sequence of the last marker applied (0: none yet). */
  markerSeq: number
  /** The last marker's checksum, and when the spoke published it (RFC 3339, from the stream). */
  checksum: string | null
  lastMarkerAt: string | null
  /** Re-reads from the stream after a marker the held items did not give (hub.ts); absent while none. */
  rereads?: number
}

export type FleetState = Record<string, HeldInventory>

export interface StreamMessage {
  subject: string
  seq: number
  /** When the stream stored it, RFC 3339. */
  time: string
  body: unknown
}

export type Verdict =
  | { kind: 'event'; key: string }
  | { kind: 'snapshot'; key: string; snapshot: Snapshot; lastMarkerAt: string }
  | { kind: 'tombstone'; key: string; inventory: ObjectRef; cluster: string }
  /** Applied already (a redelivery): nothing to do but acknowledge. */
  | { kind: 'seen'; key: string }
  /** The marker closes a snapshot whose events the hub does not all hold (joined mid-stream, retention). */
  | { kind: 'incomplete'; key: string; expected: string; got: string }
  | { kind: 'refused'; reason: string }

const EVENT_TYPES = new Set(['added', 'changed', 'removed'])
/** Held items point at shared copies of repeated strings (a cache: nothing observable). */
const strings = new SharedStrings()

/**
 * Each part escaped as one path segment, so no part carries a "/" into the next and two spoke
 * inventories never share a key (or the store's file). Valid names are left as they are, so the
 * keys, and the files saved under them, read as before.
 */
export function inventoryKey(cluster: string, inventory: ObjectRef): string {
  return [cluster, inventory.namespace, inventory.name].map(escapePathSegment).join('/')
}

/**
 * The subject is the only part of a message the NATS permissions of a spoke bind: a body whose
 * cluster or inventory is not the one its subject names is refused, so a spoke that may publish
 * only under `<prefix>.<its cluster>.>` cannot write another cluster's data.
 */
function checkAddress(prefix: string, allowed: ReadonlySet<string>, msg: StreamMessage): { cluster: string; inventory: ObjectRef } | string {
  const body = msg.body as { cluster?: unknown; inventory?: { namespace?: unknown; name?: unknown } } | null
  if (!body || typeof body !== 'object' || typeof body.cluster !== 'string' || !body.inventory ||
    typeof body.inventory.namespace !== 'string' || typeof body.inventory.name !== 'string') return 'not a Kollect event'
  const inventory = { namespace: body.inventory.namespace, name: body.inventory.name }
  const tokens = msg.subject.split('.')
  const own = prefix.split('.').length
  const [cluster, namespace, name] = tokens.slice(own)
  if (tokens.length !== own + 4) return `unexpected subject ${msg.subject}`
  if (cluster !== escapeSubjectToken(body.cluster)) return `cluster ${JSON.stringify(body.cluster)} published under ${msg.subject}`
  if (namespace !== escapeSubjectToken(inventory.namespace) || name !== escapeSubjectToken(inventory.name)) {
    return `inventory ${refKey(inventory)} published under ${msg.subject}`
  }
  // Names as the spoke's API server would have them: the hub keys, paths and rows are built from them.
  const clusterProblem = clusterLabelProblem(body.cluster)
  if (clusterProblem) return `cluster ${clusterProblem}`
  if (!isNamespaceName(inventory.namespace) || !isObjectName(inventory.name)) {
    return `inventory ${JSON.stringify(refKey(inventory).slice(0, 320))} is not a Kubernetes namespace and name`
  }
  if (!allowed.has(body.cluster)) return `cluster ${JSON.stringify(body.cluster)} is not in the hub's clusters`
  return { cluster: body.cluster, inventory }
}

/** Apply one message to `state` (in place) and say what the hub must do next. */
export function applyMessage(state: FleetState, prefix: string, allowed: ReadonlySet<string>, msg: StreamMessage): Verdict {
  const address = checkAddress(prefix, allowed, msg)
  if (typeof address === 'string') return { kind: 'refused', reason: address }
  const key = inventoryKey(address.cluster, address.inventory)
  const held = (state[key] ??= { ...address, items: {}, markerSeq: 0, checksum: null, lastMarkerAt: null })
  const body = msg.body as ItemEvent | SnapshotMarker
  if (body.type === 'snapshot' || body.type === 'tombstone') {
    if (msg.seq <= held.markerSeq) return { kind: 'seen', key }
    held.markerSeq = msg.seq
    held.lastMarkerAt = msg.time
    if (body.type === 'tombstone') {
      delete state[key]
      return { kind: 'tombstone', key, ...address }
    }
    const snapshot = snapshotOf(held)
    held.checksum = body.checksum
    if (snapshot.checksum !== body.checksum) return { kind: 'incomplete', key, expected: body.checksum, got: snapshot.checksum }
    return { kind: 'snapshot', key, snapshot, lastMarkerAt: msg.time }
  }
  const event = body as Partial<ItemEvent>
  if (typeof event.key !== 'string' || !EVENT_TYPES.has(String(event.type))) return { kind: 'refused', reason: 'not a Kollect event' }
  // Events are keyed by item, and a redelivered older event must not undo a newer one.
  const prior = held.items[event.key]
  if (prior && prior.seq >= msg.seq) return { kind: 'seen', key }
  // The stream sequence alone does not order an item's events: a copy re-published later is
  // newer there. The spoke does: every event names the marker it follows (previousChecksum), so
  // one that does not follow the hub's last marker is a copy of an older event, or one of a later
  // export that arrived before its predecessors (redeliveries after a crash). Either way it is not
  // applied here; the later marker it belongs to re-reads the stream in order (hub.ts).
  if (held.markerSeq > 0 && (event.previousChecksum ?? null) !== held.checksum) return { kind: 'seen', key }
  // Within one export too (an interrupted one retried): a change or removal starts from the item
  // as the spoke last published it, so one whose `before` is not what the hub holds is a copy.
  if (prior?.item && event.type !== 'added' && (!event.before || itemHash(event.before) !== itemHash(prior.item))) return { kind: 'seen', key }
  if (event.type === 'removed') {
    held.items[event.key] = { seq: msg.seq, item: null }
  } else if (event.after && itemKey(event.after) === event.key) {
    strings.share(event.after, event.after.target)
    held.items[event.key] = { seq: msg.seq, item: event.after }
  } else {
    return { kind: 'refused', reason: `event for ${event.key} carries no matching item` }
  }
  return { kind: 'event', key }
}

export function snapshotOf(held: HeldInventory): Snapshot {
  return buildSnapshot(held.inventory, held.cluster, Object.values(held.items).flatMap((i) => (i.item ? [i.item] : [])))
}
