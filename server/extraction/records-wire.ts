// A target report written from its items' JSON texts, and the object records (hooks/target-tally.ts)
// an extraction child sends along with it: for each object its part in the sync and where its
// item's text sits in the report. The server sends the report on as it is, and keeps each item
// as that text, so a kept item is never parsed or serialised again.
import type { Item, ObjectRef, TargetReport } from '../../api/types.js'
import type { ItemRecord, ItemOrder, ObjectRecord, Tallied } from '../../hooks/target-tally.js'

export interface ReportHead {
  target: ObjectRef
  generation: number
  uid?: string
  checksum: string
  /** A report of changes (TargetReport.base): the items given are the changed ones. */
  base?: string
  removedKeys?: string[]
}

/** The report's JSON, as JSON.stringify writes a TargetReport, and the byte offset of each item's text in it. */
export function reportJson(head: ReportHead, tallied: Pick<Tallied<string>, 'items' | 'failedKeys'>): { json: Buffer; offsets: number[] } {
  const { items, failedKeys } = tallied
  const texts = new Array<string>(items.length)
  const hashes = new Array<string>(items.length)
  const generations = new Array<number | null>(items.length)
  const offsets = new Array<number>(items.length)
  const open = `{"target":${JSON.stringify(head.target)},"generation":${head.generation}${head.uid ? `,"uid":${JSON.stringify(head.uid)}` : ''},` +
    `"checksum":${JSON.stringify(head.checksum)},"items":[`
  let at = Buffer.byteLength(open)
  items.forEach((item, i) => {
    texts[i] = item.value
    hashes[i] = item.hash
    generations[i] = item.generation
    offsets[i] = at
    at += Buffer.byteLength(item.value) + 1
  })
  const changes = head.base === undefined ? '' : `,"base":${JSON.stringify(head.base)},"removedKeys":${JSON.stringify(head.removedKeys ?? [])}`
  const close = `],"failedKeys":${JSON.stringify(failedKeys)},"itemHashes":${JSON.stringify(hashes)},` +
    `"itemGenerations":${JSON.stringify(generations)}${changes}}`
  return { json: Buffer.from(open + texts.join(',') + close), offsets }
}

/** Items as their JSON texts, as reportJson takes them, and each one's place among them. */
export function asTexts(items: readonly ItemRecord<Item>[]): { texts: ItemRecord<string>[]; index: Map<ItemRecord<Item>, number> } {
  const index = new Map<ItemRecord<Item>, number>()
  const texts = items.map((item, i) => {
    index.set(item, i)
    return { ...item, value: JSON.stringify(item.value) }
  })
  return { texts, index }
}

/** Per object: key, matched, failure, failedKey, its item's index in the report (-1: none). */
type WireObject = [string, 0 | 1, string | null, string | null, number]
/**
 * Per item in report order: its text's offset and length in the report, and its attributes' bytes.
 * Its hash, generation and identity are the report's own (itemHashes, itemGenerations, the item),
 * read from it only when the records are kept: a first sync's answer does not wait for them.
 */
type WireItem = [number, number, number]

/** The records' JSON, for a report reportJson wrote from the same tally (index: asTexts'). */
export function encodeRecords(
  records: readonly (readonly [string, ObjectRecord<Item>])[],
  items: readonly ItemRecord<string>[],
  index: ReadonlyMap<ItemRecord<Item>, number>,
  offsets: readonly number[],
): string {
  const wireItems = items.map((item, i): WireItem => [offsets[i] as number, Buffer.byteLength(item.value), item.bytes])
  const objects = records.map(([key, r]): WireObject => [
    key, r.matched ? 1 : 0, r.failure ?? null, r.failedKey ?? null, r.item ? (index.get(r.item) ?? -1) : -1,
  ])
  return JSON.stringify({ objects, items: wireItems })
}

/** The records by key, each item as its text in the report; null when the bytes are not what encodeRecords wrote. */
export function decodeRecords(meta: Buffer, report: Buffer): Map<string, ObjectRecord<string>> | null {
  const wire = JSON.parse(meta.toString('utf8')) as { objects?: WireObject[]; items?: WireItem[] }
  const parsed = JSON.parse(report.toString('utf8')) as TargetReport
  if (!Array.isArray(wire.objects) || !Array.isArray(wire.items) || wire.items.length !== parsed.items.length) return null
  const items: (ItemRecord<string> | null)[] = wire.items.map(([start, length, bytes], i) => {
    const item = parsed.items[i] as Item
    const hash = parsed.itemHashes?.[i]
    if (start + length > report.length || hash === undefined) return null
    const order: ItemOrder = [item.group, item.version, item.kind, item.namespace, item.name, item.uid]
    return { value: report.toString('utf8', start, start + length), hash, generation: parsed.itemGenerations?.[i] ?? null, bytes, order }
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
  return out
}
