import { createHash } from 'node:crypto'
import { itemHash, itemKey } from '../../api/canonical.js'
import type { Item, ObjectRef, Snapshot } from '../../api/types.js'
import type { HeldItem, ItemDiff } from '../diff.js'
import { itemPath, renderItem } from '../document.js'
import { renderPath, type TemplateValues } from '../escape.js'
import type { WriteResult } from '../sink.js'
import type { S3Layout } from './config.js'
import { parseToken, type FencingToken } from '../fence.js'

// Pure: which keys a snapshot becomes in the bucket. Under one inventory's prefix:
//   latest.json                          the pointer: the checksum the prefix holds now
//   snapshots/<time>-<checksum>.json     document layout: every export's canonical document
//   items/<target>/<group>/<kind>/<namespace>/<name>.json   perResource layout: one object per item

const POINTER_VERSION = 1

/** The small object every export ends with; a reader starts here. */
export interface Pointer {
  version: typeof POINTER_VERSION
  cluster: string
  inventory: ObjectRef
  checksum: string
  previousChecksum: string | null
  itemCount: number
  layout: S3Layout
  /** document layout: the key of the snapshot document. */
  snapshot?: string
  /** Leader election: the writer's fencing token; a writer with a lower epoch of the same Lease is refused. */
  fencing?: FencingToken
}

/**
 * The prefix of one inventory's keys, without a trailing "/": the template's placeholders are
 * escaped as single segments (escapePathSegment), so a name never adds a level or climbs one.
 */
export function inventoryPrefix(template: string, values: TemplateValues): string {
  const root = '/prefix'
  const rendered = renderPath(root, template, values).slice(root.length + 1)
  if (rendered === '' || rendered.split('/').some((part) => part === '' || part === '.')) {
    throw new Error(`prefix template "${template}" must render to a key prefix without empty segments`)
  }
  return rendered
}

export function pointerKey(prefix: string): string {
  return `${prefix}/latest.json`
}

export function snapshotsDir(prefix: string): string {
  return `${prefix}/snapshots/`
}

export function itemsDir(prefix: string): string {
  return `${prefix}/items`
}

export function itemObjectKey(prefix: string, item: Item): string {
  return itemPath(itemsDir(prefix), item)
}

/** UTC, to the millisecond, in a form that sorts as text: 20261201T071500123Z. */
export function timeStamp(at: Date): string {
  return at.toISOString().replace(/[-:.]/g, '')
}

/** Keyed by time, then checksum: listing the directory is the history, oldest first. */
export function snapshotKey(prefix: string, at: Date, checksum: string): string {
  return `${snapshotsDir(prefix)}${timeStamp(at)}-${checksum}.json`
}

export function encodePointer(pointer: Pointer): string {
  const { version, cluster, inventory, checksum, previousChecksum, itemCount, layout, snapshot, fencing } = pointer
  const body = {
    version, cluster, inventory, checksum, previousChecksum, itemCount, layout, ...(snapshot ? { snapshot } : {}), ...(fencing ? { fencing } : {}),
  }
  return `${JSON.stringify(body, null, 2)}\n`
}

/** The pointer a store holds, or undefined when the text is not one (it is then overwritten). */
export function parsePointer(text: string): Pointer | undefined {
  try {
    const value = JSON.parse(text) as Partial<Pointer> | null
    if (value?.version !== POINTER_VERSION || typeof value.checksum !== 'string') return undefined
    if (value.layout !== 'document' && value.layout !== 'perResource') return undefined
    const { fencing, ...pointer } = value as Pointer
    const token = parseToken(fencing)
    return token ? { ...pointer, fencing: token } : pointer
  } catch {
    return undefined
  }
}

export function pointerFor(snapshot: Snapshot, layout: S3Layout, previous: Pointer | undefined, documentKey?: string, fencing?: FencingToken): Pointer {
  return {
    version: POINTER_VERSION,
    cluster: snapshot.cluster,
    inventory: snapshot.inventory,
    checksum: snapshot.checksum,
    // A rewrite of the same snapshot (a repair) keeps the history the pointer tells.
    previousChecksum: previous?.checksum === snapshot.checksum ? previous.previousChecksum : previous?.checksum ?? null,
    itemCount: snapshot.itemCount,
    layout,
    ...(documentKey ? { snapshot: documentKey } : {}),
    ...(fencing ? { fencing } : {}),
  }
}

/** The ETag S3 gives a single-part upload without KMS encryption: the quoted MD5 of the body. */
export function etagOf(text: string): string {
  return `"${createHash('md5').update(text, 'utf8').digest('hex')}"`
}

/** perResource: what the prefix holds, per item key: its hash and object key. */
export interface HeldObjects {
  items: Map<string, HeldItem>
  keys: Map<string, string>
}

export interface ObjectPlan {
  put: Map<string, string>
  delete: string[]
  result: WriteResult
  held: HeldObjects
}

/**
 * perResource from a held state this sink wrote itself: only added and changed items are put,
 * only removed ones deleted. An item recreated under the same name (a new uid) has the removed
 * one's key: that key is written, never deleted.
 */
export function planFromDiff(prefix: string, snapshot: Snapshot, held: HeldObjects, diff: ItemDiff): ObjectPlan {
  const put = new Map<string, string>()
  for (const item of diff.added) put.set(itemObjectKey(prefix, item), renderItem(item))
  for (const { after } of diff.changed) put.set(itemObjectKey(prefix, after), renderItem(after))
  const keys = new Map<string, string>()
  for (const item of snapshot.items) keys.set(itemKey(item), itemObjectKey(prefix, item))
  const kept = new Set(keys.values())
  const remove: string[] = []
  for (const { key } of diff.removed) {
    const objectKey = held.keys.get(key)
    if (objectKey !== undefined && !kept.has(objectKey)) remove.push(objectKey)
  }
  return {
    put,
    delete: remove,
    result: { added: diff.added.length, changed: diff.changed.length, removed: diff.removed.length },
    held: { items: diff.next, keys },
  }
}

/**
 * perResource against a listing of the prefix (key → ETag), when the held state is unknown (a
 * start, another writer moved the pointer): objects whose ETag is the MD5 of what the item
 * renders to stay; every other item is put; every object no item renders to is deleted.
 */
export function planFromListing(prefix: string, snapshot: Snapshot, listed: ReadonlyMap<string, string>): ObjectPlan {
  const put = new Map<string, string>()
  const items = new Map<string, HeldItem>()
  const keys = new Map<string, string>()
  const result: WriteResult = { added: 0, changed: 0, removed: 0 }
  for (const item of snapshot.items) {
    const objectKey = itemObjectKey(prefix, item)
    const key = itemKey(item)
    keys.set(key, objectKey)
    items.set(key, { hash: itemHash(item) })
    const text = renderItem(item)
    const etag = listed.get(objectKey)
    if (etag === undefined) result.added++
    else if (etag !== etagOf(text)) result.changed++
    else continue
    put.set(objectKey, text)
  }
  const kept = new Set(keys.values())
  const remove = [...listed.keys()].filter((k) => !kept.has(k)).sort()
  result.removed = remove.length
  return { put, delete: remove, result, held: { items, keys } }
}

/**
 * Retention: the snapshot documents beyond the newest `keep` (by key, which sorts by time),
 * never the one the pointer names. keep 0 keeps all.
 */
export function expiredSnapshots(keys: readonly string[], keep: number, current: string | undefined): string[] {
  if (keep <= 0) return []
  const sorted = [...keys].filter((k) => k !== current).sort()
  const room = current === undefined ? keep : keep - 1
  return sorted.slice(0, Math.max(0, sorted.length - room))
}
