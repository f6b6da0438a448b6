import { createHash } from 'node:crypto'
import { isDeepStrictEqual } from 'node:util'
import { canonicalJson, itemHash, itemKey } from '../../api/canonical.js'
import type { Item, Snapshot } from '../../api/types.js'
import { parseSnapshotDocument, renderItem } from '../document.js'
import { itemPath, type FilePlan } from './encode.js'

// Pure: how the files at the branch tip differ from the files the snapshot renders to (the
// very encoder a write uses, so equal means byte-equal), and the plan that puts them back.

const MAX_EXAMPLES = 5

export type ObjectFormat = 'sha1' | 'sha256'

export interface Drift {
  differences: number
  /** Item keys, or a path for a file no item renders to (a stray file, the document's header). */
  examples: string[]
  /** The files a repair writes and prunes. */
  plan: FilePlan
}

/** The object id git gives a file with this content: equal ids mean equal bytes, without a read. */
export function blobId(text: string, format: ObjectFormat): string {
  const body = Buffer.from(text, 'utf8')
  return createHash(format).update(`blob ${body.length}\0`).update(body).digest('hex')
}

/**
 * Document layout: `held` is the document's text at the tip (undefined when absent). Items are
 * compared by identity and hash; the envelope (checksum, counts) or the text's layout, when that
 * is all that differs, is one difference named by the path.
 */
export function documentDrift(managed: string, snapshot: Snapshot, rendered: string, held: string | undefined): Drift {
  const counter = new Counter()
  if (held !== rendered) {
    const parsed = held === undefined ? undefined : parseSnapshotDocument(held)
    const theirs = new Map((parsed?.items ?? []).map((item) => [itemKey(item), item]))
    // In the snapshot's order, as perResource reports them; what is left of theirs was added by someone else.
    for (const item of snapshot.items) {
      const key = itemKey(item)
      if (!sameItem(theirs.get(key), item)) counter.note(key)
      theirs.delete(key)
    }
    for (const key of theirs.keys()) counter.note(key)
    const envelope = parsed && canonicalJson(parsed.envelope)
    if (counter.differences === 0 || envelope !== canonicalJson({ ...snapshot, items: undefined })) counter.note(managed)
  }
  return { ...counter.found(), plan: { write: new Map([[managed, rendered]]) } }
}

/**
 * perResource layout: `held` is the object id of every file under the inventory's directory at
 * the tip, by path. An item whose file is missing or differs, and a file no item renders to,
 * each count once; the plan rewrites only those.
 */
export function resourceDrift(managed: string, snapshot: Snapshot, held: ReadonlyMap<string, string>, format: ObjectFormat): Drift {
  const counter = new Counter()
  const write = new Map<string, string>()
  const keep = new Set<string>()
  for (const item of snapshot.items) {
    const file = itemPath(managed, item)
    const text = renderItem(item)
    keep.add(file)
    if (held.get(file) !== blobId(text, format)) {
      write.set(file, text)
      counter.note(itemKey(item))
    }
  }
  for (const file of held.keys()) if (!keep.has(file)) counter.note(file)
  return { ...counter.found(), plan: { write, prune: { dir: managed, keep } } }
}

// Structural equality is a third of the cost of hashing 10k parsed items; the hash, which is what
// a write compares, settles the rare case it calls unequal (a -0, a key set to undefined).
function sameItem(theirs: Item | undefined, ours: Item): boolean {
  return theirs !== undefined && (isDeepStrictEqual(theirs, ours) || itemHash(theirs) === itemHash(ours))
}

class Counter {
  differences = 0
  private readonly examples: string[] = []

  note(example: string): void {
    this.differences++
    if (this.examples.length < MAX_EXAMPLES) this.examples.push(example)
  }

  found(): { differences: number; examples: string[] } {
    return { differences: this.differences, examples: this.examples }
  }
}
