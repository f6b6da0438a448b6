import { createHash } from 'node:crypto'
import { itemKey } from '../../api/canonical.js'
import type { Snapshot } from '../../api/types.js'
import { itemPath, renderItem } from '../document.js'
import { documentDifferences, DriftCounter, type Differences } from '../drift.js'
import type { FilePlan } from './encode.js'

// Pure: how the files at the branch tip differ from the files the snapshot renders to (the
// very encoder a write uses, so equal means byte-equal), and the plan that puts them back.

export type ObjectFormat = 'sha1' | 'sha256'

export interface Drift extends Differences {
  /** The files a repair writes and prunes. */
  plan: FilePlan
}

/** The object id git gives a file with this content: equal ids mean equal bytes, without a read. */
export function blobId(text: string, format: ObjectFormat): string {
  const body = Buffer.from(text, 'utf8')
  return createHash(format).update(`blob ${body.length}\0`).update(body).digest('hex')
}

/** Document layout: `held` is the document's text at the tip; a repair rewrites the document. */
export function documentDrift(managed: string, snapshot: Snapshot, rendered: string, held: string | undefined): Drift {
  return { ...documentDifferences(managed, snapshot, rendered, held), plan: { write: new Map([[managed, rendered]]) } }
}

/**
 * perResource layout: `held` is the object id of every file under the inventory's directory at
 * the tip, by path. An item whose file is missing or differs, and a file no item renders to,
 * each count once; the plan rewrites only those.
 */
export function resourceDrift(managed: string, snapshot: Snapshot, held: ReadonlyMap<string, string>, format: ObjectFormat): Drift {
  const counter = new DriftCounter()
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
