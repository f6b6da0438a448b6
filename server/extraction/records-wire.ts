// The object records (hooks/target-tally.ts) an extraction child sends along with a target
// report: each object's part in the sync and its item's place in the report. The server sends
// the report on as it is, and keeps each item as its text there, so a kept item is never
// serialised again; and it writes reports from kept items' texts (reportJson).
import type { Item, ObjectRef } from '../../api/types.js'
import type { ItemRecord, ObjectRecord, Tallied } from '../../hooks/target-tally.js'

export interface ReportHead {
  target: ObjectRef
  generation: number
  uid?: string
  checksum: string
  /** A report of changes (TargetReport.base): the items given are the changed ones. */
  base?: string
  removedKeys?: string[]
}

/** The report's JSON text, as JSON.stringify writes a TargetReport, from its items' texts (in order); and where each text starts in it. */
function reportText(
  head: ReportHead, texts: string[], hashes: string[], generations: (number | null)[], failedKeys: string[],
): { text: string; starts: number[] } {
  const open = `{"target":${JSON.stringify(head.target)},"generation":${head.generation}${head.uid ? `,"uid":${JSON.stringify(head.uid)}` : ''},` +
    `"checksum":${JSON.stringify(head.checksum)},"items":[`
  const starts = new Array<number>(texts.length)
  let at = open.length
  for (let i = 0; i < texts.length; i++) {
    starts[i] = at
    at += (texts[i] as string).length + 1
  }
  const changes = head.base === undefined ? '' : `,"base":${JSON.stringify(head.base)},"removedKeys":${JSON.stringify(head.removedKeys ?? [])}`
  const close = `],"failedKeys":${JSON.stringify(failedKeys)},"itemHashes":${JSON.stringify(hashes)},` +
    `"itemGenerations":${JSON.stringify(generations)}${changes}}`
  return { text: open + texts.join(',') + close, starts }
}

/** The report's JSON, as JSON.stringify writes a TargetReport, from its items' texts. */
export function reportJson(head: ReportHead, tallied: Pick<Tallied<string>, 'items' | 'failedKeys'>): Buffer {
  const { items, failedKeys } = tallied
  const { text } = reportText(head, items.map((i) => i.value), items.map((i) => i.hash), items.map((i) => i.generation), failedKeys)
  return Buffer.from(text)
}

/** Per object: key, matched, failure, failedKey, its item's index in the report (-1: none). */
type WireObject = [string, 0 | 1, string | null, string | null, number]
/** Per item, in report order: hash, generation, its order (group, version, kind, namespace, name, uid), its text's start and length. */
type WireItem = [string, number | null, ...ItemRecord<string>['order'], number, number]

/**
 * A target report's text, written by the child from its items' texts (reportText: each item's
 * canonical JSON, where the hooks kept the text its hash was taken of), and the records' JSON
 * for it: each object's part, and each item's hash, generation, identity and place in the text,
 * so that the server reads the records without parsing the report.
 */
export function encodeRecords(
  head: ReportHead, records: readonly (readonly [string, ObjectRecord<Item>])[], tallied: Pick<Tallied<Item>, 'items' | 'failedKeys'>,
): { meta: string; report: string } {
  const { items, failedKeys } = tallied
  // The texts the items' hashes were taken of, where the hooks kept them: not serialised a second time.
  const texts = items.map((item) => item.json ?? JSON.stringify(item.value))
  const hashes = items.map((item) => item.hash)
  const { text, starts } = reportText(head, texts, hashes, items.map((item) => item.generation), failedKeys)
  const index = new Map<ItemRecord<Item>, number>()
  items.forEach((item, i) => index.set(item, i))
  const objects = records.map(([key, r]): WireObject => [
    key, r.matched ? 1 : 0, r.failure ?? null, r.failedKey ?? null, r.item ? (index.get(r.item) ?? -1) : -1,
  ])
  const placed = items.map((item, i): WireItem => [item.hash, item.generation, ...item.order, starts[i] as number, (texts[i] as string).length])
  // The attributes' bytes count against the sync's bound (ItemRecord.bytes); the report does not carry them.
  const meta = JSON.stringify({ objects, items: placed, bytes: items.map((i) => i.bytes), failedKeys })
  return { meta, report: text }
}

/** What decodeRecords() reads: the records by key, and the report's failedKeys. */
export interface Decoded {
  records: Map<string, ObjectRecord<string>>
  failedKeys: string[]
}

/** The records by key, each item as its text in the report; null when the bytes are not what encodeRecords wrote. */
export function decodeRecords(meta: Buffer, report: Buffer): Decoded | null {
  const wire = JSON.parse(meta.toString('utf8')) as { objects?: WireObject[]; items?: WireItem[]; bytes?: number[]; failedKeys?: string[] }
  const { objects, items: placed, bytes, failedKeys } = wire
  if (!Array.isArray(objects) || !Array.isArray(placed) || !Array.isArray(bytes) || !Array.isArray(failedKeys) || bytes.length !== placed.length) return null
  const text = report.toString('utf8')
  const items: ItemRecord<string>[] = new Array(placed.length)
  for (let i = 0; i < placed.length; i++) {
    const [hash, generation, group, version, kind, namespace, name, uid, start, length] = placed[i] as WireItem
    // Each item's text is an object where the records say it is.
    if (text.charCodeAt(start) !== 0x7b || text.charCodeAt(start + length - 1) !== 0x7d) return null
    items[i] = { value: text.slice(start, start + length), hash, generation, bytes: bytes[i] as number, order: [group, version, kind, namespace, name, uid] }
  }
  const out = new Map<string, ObjectRecord<string>>()
  for (const [key, matched, failure, failedKey, itemIndex] of objects) {
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
  return { records: out, failedKeys }
}
