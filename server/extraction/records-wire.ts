// The object records (hooks/target-tally.ts) an extraction child sends along with a target
// report: each object's part in the sync and its item's place in the report. The server sends
// the report on as it is, and keeps each item as its text there, so a kept item is never
// serialised again; and it writes reports from kept items' texts (reportJson).
import { itemHash } from '../../api/canonical.js'
import type { Item, ObjectRef, TargetReport } from '../../api/types.js'
import type { ItemRecord, ObjectRecord, Tallied } from '../../hooks/target-tally.js'
import { arrayElements, objectMembers } from './body-scan.js'

export interface ReportHead {
  target: ObjectRef
  generation: number
  uid?: string
  checksum: string
  /** A report of changes (TargetReport.base): the items given are the changed ones. */
  base?: string
  removedKeys?: string[]
}

/** The report's JSON, as JSON.stringify writes a TargetReport, from its items' texts. */
export function reportJson(head: ReportHead, tallied: Pick<Tallied<string>, 'items' | 'failedKeys'>): Buffer {
  const { items, failedKeys } = tallied
  const texts = new Array<string>(items.length)
  const hashes = new Array<string>(items.length)
  const generations = new Array<number | null>(items.length)
  const open = `{"target":${JSON.stringify(head.target)},"generation":${head.generation}${head.uid ? `,"uid":${JSON.stringify(head.uid)}` : ''},` +
    `"checksum":${JSON.stringify(head.checksum)},"items":[`
  items.forEach((item, i) => {
    texts[i] = item.value
    hashes[i] = item.hash
    generations[i] = item.generation
  })
  const changes = head.base === undefined ? '' : `,"base":${JSON.stringify(head.base)},"removedKeys":${JSON.stringify(head.removedKeys ?? [])}`
  const close = `],"failedKeys":${JSON.stringify(failedKeys)},"itemHashes":${JSON.stringify(hashes)},` +
    `"itemGenerations":${JSON.stringify(generations)}${changes}}`
  return Buffer.from(open + texts.join(',') + close)
}

/** Per object: key, matched, failure, failedKey, its item's index in the report (-1: none). */
type WireObject = [string, 0 | 1, string | null, string | null, number]

/**
 * The records' JSON, for the report the same tally made (items: the tally's, in report order).
 * Each item's text, hash, generation and identity are the report's own: read from it only when
 * the records are kept, so that a first sync's answer does not wait for them.
 */
export function encodeRecords(records: readonly (readonly [string, ObjectRecord<Item>])[], items: readonly ItemRecord<Item>[]): string {
  const index = new Map<ItemRecord<Item>, number>()
  items.forEach((item, i) => index.set(item, i))
  const objects = records.map(([key, r]): WireObject => [
    key, r.matched ? 1 : 0, r.failure ?? null, r.failedKey ?? null, r.item ? (index.get(r.item) ?? -1) : -1,
  ])
  // The attributes' bytes count against the sync's bound (ItemRecord.bytes); the report does not carry them.
  return JSON.stringify({ objects, bytes: items.map((i) => i.bytes) })
}

/** What decodeRecords() reads: the records by key, and the report's failedKeys. */
export interface Decoded {
  records: Map<string, ObjectRecord<string>>
  failedKeys: string[]
}

/** The records by key, each item as its text in the report; null when the bytes are not what encodeRecords and JSON.stringify wrote. */
export function decodeRecords(meta: Buffer, report: Buffer): Decoded | null {
  const wire = JSON.parse(meta.toString('utf8')) as { objects?: WireObject[]; bytes?: number[] }
  const parsed = JSON.parse(report.toString('utf8')) as TargetReport
  const itemsAt = objectMembers(report, 0)?.members.find((m) => m.key === 'items')
  const texts = itemsAt && arrayElements(report, itemsAt.start)
  if (!Array.isArray(wire.objects) || !Array.isArray(wire.bytes) || !texts) return null
  if (texts.length !== parsed.items.length || wire.bytes.length !== texts.length) return null
  const items = texts.map(({ start, end }, i): ItemRecord<string> => {
    const item = parsed.items[i] as Item
    return {
      value: report.toString('utf8', start, end),
      hash: parsed.itemHashes?.[i] ?? itemHash(item),
      generation: parsed.itemGenerations?.[i] ?? null,
      bytes: wire.bytes?.[i] as number,
      order: [item.group, item.version, item.kind, item.namespace, item.name, item.uid],
    }
  })
  const out = new Map<string, ObjectRecord<string>>()
  for (const [key, matched, failure, failedKey, itemIndex] of wire.objects) {
    const record: ObjectRecord<string> = { matched: matched === 1 }
    if (failure !== null) record.failure = failure
    if (failedKey !== null) record.failedKey = failedKey
    if (itemIndex >= 0) {
      const item = items[itemIndex]
      if (!item) return null
      record.item = item
    }
    out.set(key, record)
  }
  return Array.isArray(parsed.failedKeys) ? { records: out, failedKeys: parsed.failedKeys } : null
}
