import { itemHash, itemKey } from '../api/canonical.js'
import type { Item, Snapshot } from '../api/types.js'
import type { DriftResult } from './sink.js'

export interface HeldItem {
  hash: string
  item?: Item
}

export interface ItemDiff {
  added: Item[]
  changed: { before?: Item; after: Item }[]
  removed: { key: string; before?: Item }[]
  /** Hash per key of the new state, ready to be remembered as "what the sink holds". */
  next: Map<string, HeldItem>
}

/** Diff a snapshot's items against what a sink holds, keyed by item identity. */
export function diffItems(held: ReadonlyMap<string, HeldItem>, items: readonly Item[], keepItems = false): ItemDiff {
  const added: Item[] = []
  const changed: ItemDiff['changed'] = []
  const next = new Map<string, HeldItem>()
  for (const item of items) {
    const key = itemKey(item)
    const hash = itemHash(item)
    next.set(key, keepItems ? { hash, item } : { hash })
    const before = held.get(key)
    if (!before) added.push(item)
    else if (before.hash !== hash) changed.push({ before: before.item, after: item })
  }
  const removed: ItemDiff['removed'] = []
  for (const [key, before] of held) {
    if (!next.has(key)) removed.push({ key, before: before.item })
  }
  return { added, changed, removed, next }
}

export function isEmptyDiff(d: ItemDiff): boolean {
  return d.added.length === 0 && d.changed.length === 0 && d.removed.length === 0
}

/**
 * How what an event stream last told its consumers (their items and the last marker's checksum)
 * differs from a snapshot: each differing item once, or the marker (named by `marker`) when the
 * items agree but the checksum does not. Examples are sorted, so the same drift reads the same.
 */
export function publishedDrift(held: ReadonlyMap<string, HeldItem>, heldChecksum: string | undefined, snapshot: Snapshot, marker: string): DriftResult {
  const diff = diffItems(held, snapshot.items)
  const keys = [...diff.added.map(itemKey), ...diff.changed.map((c) => itemKey(c.after)), ...diff.removed.map((r) => r.key)].sort()
  const markers = keys.length === 0 && heldChecksum !== snapshot.checksum ? [marker] : []
  return { differences: keys.length + markers.length, examples: [...markers, ...keys].slice(0, 5), repaired: false }
}
