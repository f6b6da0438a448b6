import type { ItemDiff } from './diff.js'
import type { WriteResult } from './sink.js'

/** The counts a sink reports for an export that applied this diff. */
export function resultOf(diff: ItemDiff): WriteResult {
  return { added: diff.added.length, changed: diff.changed.length, removed: diff.removed.length }
}
