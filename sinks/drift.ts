import { isDeepStrictEqual } from 'node:util'
import { canonicalJson, itemHash, itemKey } from '../api/canonical.js'
import type { Item, Snapshot } from '../api/types.js'
import { parseSnapshotDocument } from './document.js'

// Pure: how a store of record differs from the snapshot, counted and named alike by every sink
// that keeps documents (git, s3), so the same edit reads the same in status whichever holds it.

/** How many differences a drift result names; the rest are only counted. */
export const DRIFT_EXAMPLES = 5

export interface Differences {
  differences: number
  /** Item keys, or a path for a file no item renders to (a stray file, the document's header). */
  examples: string[]
}

export class DriftCounter {
  differences = 0
  private readonly examples: string[] = []

  note(example: string): void {
    this.differences++
    if (this.examples.length < DRIFT_EXAMPLES) this.examples.push(example)
  }

  found(): Differences {
    return { differences: this.differences, examples: this.examples }
  }
}

/**
 * A snapshot document: `held` is the text the store holds (undefined when absent), `rendered`
 * the snapshot's. Items are compared by identity and hash; the envelope (checksum, counts) or the
 * text's layout, when that is all that differs, is one difference named by `name`.
 */
export function documentDifferences(name: string, snapshot: Snapshot, rendered: string, held: string | undefined): Differences {
  const counter = new DriftCounter()
  if (held !== rendered) {
    const parsed = held === undefined ? undefined : parseSnapshotDocument(held)
    noteItemDifferences(counter, parsed?.items ?? [], snapshot.items)
    const envelope = parsed && canonicalJson(parsed.envelope)
    if (counter.differences === 0 || envelope !== canonicalJson({ ...snapshot, items: undefined })) counter.note(name)
  }
  return counter.found()
}

/** Each item that differs between what a file holds (`held`) and what it should (`items`), once. */
export function noteItemDifferences(counter: DriftCounter, held: readonly Item[], items: readonly Item[]): void {
  const theirs = new Map(held.map((item) => [itemKey(item), item]))
  // In the snapshot's order, as perResource reports them; what is left of theirs was added by someone else.
  for (const item of items) {
    const key = itemKey(item)
    if (!sameItem(theirs.get(key), item)) counter.note(key)
    theirs.delete(key)
  }
  for (const key of theirs.keys()) counter.note(key)
}

// Structural equality is a third of the cost of hashing 10k parsed items; the hash, which is what
// a write compares, settles the rare case it calls unequal (a -0, a key set to undefined).
function sameItem(theirs: Item | undefined, ours: Item): boolean {
  return theirs !== undefined && (isDeepStrictEqual(theirs, ours) || itemHash(theirs) === itemHash(ours))
}
