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
    const checksum = checksumOfHashes(items.map((i) => i.hash))
    return { counts: this.counts, items, failedKeys: this.failedKeys.sort(), checksum, itemBytes: this.itemBytes }
  }
}
