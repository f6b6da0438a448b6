import type { RecordsBatch } from '@platformatic/kafka'
import type { ReadRecord } from './encode.js'

// Pure: the committed records of one fetch response, as a read_committed consumer sees them.

/** Control batches (transaction commit/abort markers) carry this attribute bit. */
const IS_CONTROL = 1 << 5

interface AbortedTransaction {
  producerId: bigint
  firstOffset: bigint
}

/**
 * The records in [offset, end) of the response's batches, minus aborted transactions' and control
 * records, and the offset to fetch next. The client drops aborted batches only when their abort
 * marker is in the same response: it stops before an aborted transaction whose marker has not
 * arrived, so the caller fetches again from there (`next` equal to `offset` means no progress).
 */
export function committedRecords(
  batches: readonly RecordsBatch[], aborted: readonly AbortedTransaction[], offset: bigint, end: bigint,
): { records: ReadRecord[]; next: bigint } {
  const open = aborted.filter((a) => !batches.some((b) => b.attributes & IS_CONTROL && b.producerId === a.producerId && b.firstOffset >= a.firstOffset))
  const records: ReadRecord[] = []
  let next = offset
  for (const batch of batches) {
    if (open.some((a) => a.producerId === batch.producerId && batch.firstOffset >= a.firstOffset)) break
    next = batch.firstOffset + BigInt(batch.lastOffsetDelta) + 1n
    if (batch.attributes & IS_CONTROL) continue
    for (const record of batch.records) {
      const at = batch.firstOffset + BigInt(record.offsetDelta)
      if (at < offset || at >= end || record.key === null) continue
      const headers: Record<string, string> = {}
      for (const [k, v] of record.headers) if (k) headers[k.toString('utf8')] = v?.toString('utf8') ?? ''
      records.push({ offset: at, key: record.key.toString('utf8'), value: record.value === null ? null : record.value.toString('utf8'), headers })
    }
  }
  return { records, next }
}
