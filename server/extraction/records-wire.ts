// The object records (hooks/target-tally.ts) an extraction child sends along with a target
// report: each object's part in the sync and its item's place in the report. The server sends
// the report on as it is, and keeps each item as its text there, so a kept item is never
// serialised again; and it writes reports from kept items' texts (reportJson).
import type { Item, ObjectRef } from '../../api/types.js'
import type { ItemRecord, ObjectRecord, Tallied } from '../../hooks/target-tally.js'
import { arrayElements, MemberScan } from './body-scan.js'

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
/** Per item, in report order: its hash, generation, attribute bytes and sort order (the report's text is its value). */
type WireItem = [string, number | null, number, ...ItemRecord<Item>['order']]

/**
 * The records' JSON, for the report the same tally made (items: the tally's, in report order).
 * What the server needs of each item besides its text comes along, so that it never parses the
 * report: it only finds each item's text there (decodeRecords).
 */
export function encodeRecords(records: readonly (readonly [string, ObjectRecord<Item>])[], items: readonly ItemRecord<Item>[]): string {
  const index = new Map<ItemRecord<Item>, number>()
  items.forEach((item, i) => index.set(item, i))
  const objects = records.map(([key, r]): WireObject => [
    key, r.matched ? 1 : 0, r.failure ?? null, r.failedKey ?? null, r.item ? (index.get(r.item) ?? -1) : -1,
  ])
  return JSON.stringify({ objects, items: items.map((i): WireItem => [i.hash, i.generation, i.bytes, ...i.order]) })
}

/** The records by key, each item as its text in the report; null when the bytes are not what encodeRecords and JSON.stringify wrote. */
export function decodeRecords(meta: Buffer, report: Buffer): Map<string, ObjectRecord<string>> | null {
  const wire = JSON.parse(meta.toString('utf8')) as { objects?: WireObject[]; items?: WireItem[] }
  // The report's members up to its items: the items are read once, by arrayElements.
  const scan = new MemberScan(report, 0, undefined, 'items')
  scan.step()
  const itemsAt = scan.paused
  const texts = itemsAt && arrayElements(report, itemsAt.start)
  if (!Array.isArray(wire.objects) || !Array.isArray(wire.items) || !texts || wire.items.length !== texts.length) return null
  const items = texts.map(({ start, end }, i): ItemRecord<string> => {
    const [hash, generation, bytes, ...order] = wire.items?.[i] as WireItem
    return { value: report.toString('utf8', start, end), hash, generation, bytes, order }
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
