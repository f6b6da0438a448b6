// What each object contributed to a target sync, and the sum of those contributions: counts,
// the failed keys, and the items in report order with their checksum. syncTarget tallies the
// objects it extracts; an incremental sync (server/extraction/incremental.ts) tallies the same
// records, some kept from the last sync and some new, so both give the same answer.
import { checksumOfHashes } from '../api/canonical.js'
import { truncate } from './conditions.js'
import { NO_COUNTS, type Counts } from './target-status.js'

/** The fields items sort by (compareItems): group, version, kind, namespace, name, uid. The target is one per sync. */
type ItemOrder = readonly [string, string, string, string, string, string]

export interface ItemRecord<I> {
  value: I
  hash: string
  order: ItemOrder
  /** The object's metadata.generation. */
  generation: number | null
  /** The attributes' canonical JSON length, charged against the sync's item bytes bound. */
  bytes: number
  /** The item's canonical JSON, when its hash was taken of it: its text in the report (records-wire.ts). */
  json?: string
}

/** One object's part in a sync. Not matched and no failure: the selection left it out. */
export interface ObjectRecord<I> {
  matched: boolean
  /** Why it failed: a matchPolicy error, or extraction errors (then it may still have an item). */
  failure?: string
  /** The key of an item the exporter keeps although this object failed (it has no new item). */
  failedKey?: string
  item?: ItemRecord<I>
}

function compareOrder(a: ItemOrder, b: ItemOrder): number {
  for (let i = 0; i < 6; i++) {
    if (a[i] !== b[i]) return (a[i] as string) < (b[i] as string) ? -1 : 1
  }
  return 0
}

export interface Tallied<I> {
  counts: Counts
  items: ItemRecord<I>[]
  failedKeys: string[]
  checksum: string
  /** The items' attribute bytes, bounded per sync (ExpressionLimits.maxRequestItemBytes). */
  itemBytes: number
}

/** Adds records in the objects' key order (lastError is the first failure's). */
export class TargetTally<I> {
  readonly counts: Counts = { ...NO_COUNTS }
  private readonly items: ItemRecord<I>[] = []
  private readonly failedKeys: string[] = []
  itemBytes = 0

  add(key: string, record: ObjectRecord<I>): void {
    const c = this.counts
    if (record.matched) c.matchedCount++
    if (record.failure !== undefined) {
      c.failedCount++
      if (c.lastError === '') c.lastError = truncate(`${key}: ${record.failure}`, 256)
    }
    if (record.failedKey !== undefined) this.failedKeys.push(record.failedKey)
    if (record.item) {
      c.extractedCount++
      this.itemBytes += record.item.bytes
      this.items.push(record.item)
    }
  }

  /** The items in report order (all come from one target, so identity order is item order). */
  finish(): Tallied<I> {
    const items = this.items.sort((a, b) => compareOrder(a.order, b.order))
    return { counts: this.counts, items, failedKeys: this.failedKeys.sort(), checksum: checksumOf(items), itemBytes: this.itemBytes }
  }
}

function checksumOf<I>(items: readonly ItemRecord<I>[]): string {
  return checksumOfHashes(items.map((i) => i.hash))
}

/**
 * The tally of a set of records from the tally of the set before: before holds the records that
 * were replaced or are gone, after those that replaced them or are new. It costs a pass over the
 * items instead of a sort, which a resync in which one object of 10,000 changed would otherwise
 * pay for every object. Null when a failure is among the records, before or now (lastError is
 * the first failure in key order, which only a whole tally knows), or when an item's place is
 * not its own (two items sort the same): the caller then tallies every record.
 */
export function retally<I>(previous: Tallied<I>, before: readonly ObjectRecord<I>[], after: readonly ObjectRecord<I>[]): Tallied<I> | null {
  if (previous.counts.failedCount > 0 || previous.failedKeys.length > 0) return null
  const counts = { ...previous.counts }
  let { itemBytes } = previous
  const gone = new Set<ItemRecord<I>>()
  const added: ItemRecord<I>[] = []
  const apply = (record: ObjectRecord<I>, sign: 1 | -1): boolean => {
    if (record.failure !== undefined || record.failedKey !== undefined) return false
    if (record.matched) counts.matchedCount += sign
    if (record.item) {
      counts.extractedCount += sign
      itemBytes += sign * record.item.bytes
      if (sign < 0) gone.add(record.item)
      else added.push(record.item)
    }
    return true
  }
  if (!before.every((r) => apply(r, -1)) || !after.every((r) => apply(r, 1))) return null
  added.sort((a, b) => compareOrder(a.order, b.order))
  if (added.some((item, i) => i > 0 && compareOrder((added[i - 1] as ItemRecord<I>).order, item.order) === 0)) return null
  // The kept items in their order, with the added ones merged in.
  const items: ItemRecord<I>[] = []
  let k = 0
  for (const item of previous.items) {
    if (gone.has(item)) continue
    for (; k < added.length; k++) {
      const order = compareOrder((added[k] as ItemRecord<I>).order, item.order)
      if (order === 0) return null
      if (order > 0) break
      items.push(added[k] as ItemRecord<I>)
    }
    items.push(item)
  }
  for (; k < added.length; k++) items.push(added[k] as ItemRecord<I>)
  if (items.length !== counts.extractedCount) return null
  return { counts, items, failedKeys: [], checksum: checksumOf(items), itemBytes }
}
