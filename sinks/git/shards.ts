import { canonicalJsonPretty, itemKey } from '../../api/canonical.js'
import type { Item, Snapshot } from '../../api/types.js'
import type { ItemDiff } from '../diff.js'
import { parseSnapshotDocument, renderWithItems } from '../document.js'
import { DriftCounter, noteItemDifferences, type Differences } from '../drift.js'
import type { FilePlan } from './encode.js'

// Pure: the sharded layout. An inventory is a directory holding its envelope (inventory.json:
// the document without its items, so the checksum and counts) and a fixed number of shard files
// that share the items out by a stable hash of each item's key. A 1-item change rewrites one
// shard and the envelope; each file reads like the document, one item element per block.

export const DEFAULT_SHARDS = 16
export const MAX_SHARDS = 1024

const ENVELOPE = 'inventory.json'

/**
 * The shard an item key belongs to: FNV-1a (32-bit) over the key's UTF-16 code units, modulo
 * the count. Fixed forever: a different hash would move every item at an upgrade.
 */
export function shardOf(key: string, shards: number): number {
  let h = 0x811c9dc5
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193)
  return (h >>> 0) % shards
}

export function envelopePath(dir: string): string {
  return `${dir}/${ENVELOPE}`
}

/** items-03-of-16.json: the count is in the name, so files of another count are strays to prune. */
export function shardPath(dir: string, shard: number, shards: number): string {
  const width = String(shards - 1).length
  return `${dir}/items-${String(shard).padStart(width, '0')}-of-${shards}.json`
}

/** Every file the layout keeps for an inventory: the envelope, then the shards in order. */
export function shardedFiles(dir: string, shards: number): string[] {
  return [envelopePath(dir), ...Array.from({ length: shards }, (_, i) => shardPath(dir, i, shards))]
}

/** The envelope: the snapshot without its items, and how many shards hold them. */
export function renderEnvelope(snapshot: Snapshot, shards: number): string {
  const { items: _items, ...envelope } = snapshot
  return canonicalJsonPretty({ ...envelope, shards })
}

export function renderShard(items: readonly Item[], shard: number, shards: number): string {
  return renderWithItems({ items: [], shard, shards }, items)
}

/** Every file of the layout with its text: what a drift check compares the tip with. */
export function renderSharded(dir: string, snapshot: Snapshot, shards: number): Map<string, string> {
  const files = new Map([[envelopePath(dir), renderEnvelope(snapshot, shards)]])
  for (const [shard, items] of groupByShard(snapshot.items, shards)) files.set(shardPath(dir, shard, shards), renderShard(items, shard, shards))
  return files
}

/** The snapshot's items of the wanted shards (all when `wanted` is absent), in the snapshot's order. */
export function groupByShard(items: readonly Item[], shards: number, wanted?: ReadonlySet<number>): Map<number, Item[]> {
  const groups = new Map<number, Item[]>()
  for (const shard of wanted ?? Array.from({ length: shards }, (_, i) => i)) groups.set(shard, [])
  for (const item of items) groups.get(shardOf(itemKey(item), shards))?.push(item)
  return groups
}

/**
 * The files a snapshot changes: the envelope, every shard the diff touches, a shard the
 * directory lacks (all of them at the first export or after the count changed), and the removal
 * of every other file there (`held`: the directory's files at the tip).
 */
export function planSharded(dir: string, snapshot: Snapshot, diff: ItemDiff, held: ReadonlySet<string>, shards: number): FilePlan {
  const touched = new Set<number>()
  for (const item of [...diff.added, ...diff.changed.map((c) => c.after)]) touched.add(shardOf(itemKey(item), shards))
  for (const { key } of diff.removed) touched.add(shardOf(key, shards))
  for (let shard = 0; shard < shards; shard++) if (!held.has(shardPath(dir, shard, shards))) touched.add(shard)
  const write = new Map([[envelopePath(dir), renderEnvelope(snapshot, shards)]])
  for (const [shard, items] of groupByShard(snapshot.items, shards, touched)) write.set(shardPath(dir, shard, shards), renderShard(items, shard, shards))
  const keep = new Set(shardedFiles(dir, shards))
  return { write, remove: [...held].filter((file) => !keep.has(file)) }
}

/**
 * The items a shard file holds that belong there, or undefined when the text is not a shard of
 * this count. An item in the wrong shard is not held: the next export writes it where it belongs.
 */
export function parseShard(text: string, shard: number, shards: number): Item[] | undefined {
  const parsed = parseSnapshotDocument(text)
  if (!parsed || parsed.envelope['shard'] !== shard || parsed.envelope['shards'] !== shards) return undefined
  return parsed.items.filter((item) => shardOf(itemKey(item), shards) === shard)
}

/** An envelope's fields, or undefined when the text is not a JSON object. */
export function parseEnvelope(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text)
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

/** Which shard of which count a path under `dir` names, if any. */
export function shardOfPath(dir: string, file: string): { shard: number; shards: number } | undefined {
  const match = /^items-(\d+)-of-(\d+)\.json$/.exec(file.slice(dir.length + 1))
  if (!file.startsWith(`${dir}/`) || !match) return undefined
  const [shard, shards] = [Number(match[1]), Number(match[2])]
  return shard < shards && file === shardPath(dir, shard, shards) ? { shard, shards } : undefined
}

/**
 * How the files at the tip differ from what the snapshot renders to: `rendered` is every file of
 * the layout (renderSharded), `differing` those whose object id at the tip is not their text's,
 * `heldTexts` the tip's text of each of those it has, and `heldIds` every file under the directory. Items are counted
 * as in the document layout; the envelope, a shard that differs only in its layout, and a stray
 * file count once each. The plan rewrites only what differs.
 */
export function shardedDrift(
  dir: string,
  snapshot: Snapshot,
  shards: number,
  rendered: ReadonlyMap<string, string>,
  differing: ReadonlySet<string>,
  heldTexts: ReadonlyMap<string, string>,
  heldIds: ReadonlyMap<string, string>,
): Differences & { plan: FilePlan } {
  const counter = new DriftCounter()
  const write = new Map<string, string>()
  const groups = groupByShard(snapshot.items, shards)
  for (const [file, text] of rendered) {
    if (!differing.has(file)) continue
    write.set(file, text)
    const at = shardOfPath(dir, file)
    if (!at) {
      counter.note(file)
      continue
    }
    const held = heldTexts.get(file)
    const before = counter.differences
    noteItemDifferences(counter, (held === undefined ? undefined : parseShard(held, at.shard, at.shards)) ?? [], groups.get(at.shard) ?? [])
    if (counter.differences === before) counter.note(file)
  }
  const remove = [...heldIds.keys()].filter((file) => !rendered.has(file))
  for (const file of remove) counter.note(file)
  return { ...counter.found(), plan: { write, remove } }
}
