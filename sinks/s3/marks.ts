import { createHash } from 'node:crypto'
import { itemKey } from '../../api/canonical.js'
import type { Snapshot } from '../../api/types.js'
import { documentDifferences, DRIFT_EXAMPLES } from '../drift.js'
import type { DriftResult } from '../sink.js'
import { planFromListing, pointerKey, type Pointer } from './encode.js'

// Pure: the marks writers leave while they write item objects, and how the bucket differs from a
// snapshot. Object writes cannot be conditional on the pointer, so a writer that dies (or loses
// the pointer race) between its first object and its pointer can leave objects no pointer names.
// Its mark says so: <prefix>/writing/<writer>.json, put before the first object and refreshed
// every few hundred, deleted only after the writer's pointer landed. While another writer's mark
// is fresh, an export waits (a retriable error, so status is not Synced); a stale mark (or this
// writer's own, left by a crash) makes the next export compare every object with its snapshot.

export function marksDir(prefix: string): string {
  return `${prefix}/writing/`
}

/** A writer's mark; the writer name (a host name) is hashed so it never adds a key level. */
export function markKey(prefix: string, writer: string): string {
  return `${marksDir(prefix)}${createHash('sha256').update(writer).digest('hex').slice(0, 16)}.json`
}

export function encodeMark(writer: string, snapshot: Snapshot, written: number): string {
  return `${JSON.stringify({ writer, checksum: snapshot.checksum, written })}\n`
}

export interface Marks {
  /** Another writer is (or was very recently) writing: its key and when it last said so. */
  fresh: { key: string; at: Date }[]
  /** Left by a dead writer, or by this one before a crash: the objects need a full comparison. */
  stale: string[]
}

export function classifyMarks(listed: ReadonlyMap<string, Date>, own: string, now: Date, staleMillis: number): Marks {
  const marks: Marks = { fresh: [], stale: [] }
  for (const [key, at] of listed) {
    if (key !== own && now.getTime() - at.getTime() < staleMillis) marks.fresh.push({ key, at })
    else marks.stale.push(key)
  }
  return marks
}

export function inStep(pointer: Pointer | undefined, snapshot: Snapshot, layout: Pointer['layout']): boolean {
  return pointer?.checksum === snapshot.checksum && pointer.layout === layout
}

/**
 * perResource: every item whose object is missing or differs (by ETag, the MD5 of what it
 * renders to), every object no item renders to, and a pointer that names another snapshot.
 */
export function objectDrift(prefix: string, snapshot: Snapshot, listed: ReadonlyMap<string, string>, pointer: Pointer | undefined): DriftResult {
  const plan = planFromListing(prefix, snapshot, listed)
  const byObject = new Map<string, string>()
  for (const item of snapshot.items) byObject.set(plan.held.keys.get(itemKey(item)) as string, itemKey(item))
  const found = [...plan.put.keys()].map((o) => byObject.get(o) ?? o).concat(plan.delete)
  if (!inStep(pointer, snapshot, 'perResource')) found.push(pointerKey(prefix))
  return { differences: found.length, examples: found.slice(0, DRIFT_EXAMPLES), repaired: false }
}

/** document: the document the pointer names against the snapshot's rendering, compared as git compares its own. */
export function documentObjectDrift(prefix: string, snapshot: Snapshot, rendered: string, pointer: Pointer | undefined, held: string | undefined): DriftResult {
  let { differences, examples } = documentDifferences(pointer?.snapshot ?? pointerKey(prefix), snapshot, rendered, held)
  if (differences === 0 && !inStep(pointer, snapshot, 'document')) {
    differences = 1
    examples = [pointerKey(prefix)]
  }
  return { differences, examples, repaired: false }
}
