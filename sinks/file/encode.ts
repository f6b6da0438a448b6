import type { Snapshot } from '../../api/types.js'
import { diffItems } from '../diff.js'
import { heldFromItems, parseSnapshotItems, renderSnapshot, type DocumentFormat } from '../document.js'
import { resultOf } from '../result.js'
import { emptyResult, type WriteResult } from '../sink.js'

export interface FileWrite {
  /** Undefined when the file already holds exactly this document. */
  text: string | undefined
  result: WriteResult
}

/** What to write over `existing` (the current file text, if any) to hold `snapshot`. */
export function encodeFileWrite(existing: string | undefined, snapshot: Snapshot, format: DocumentFormat): FileWrite {
  const text = renderSnapshot(snapshot, format)
  if (existing === text) return { text: undefined, result: emptyResult() }
  const held = heldFromItems((existing === undefined ? undefined : parseSnapshotItems(existing, format)) ?? [])
  return { text, result: resultOf(diffItems(held, snapshot.items)) }
}
