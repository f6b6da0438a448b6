import type { ObjectRecord, Tallied } from '../../hooks/target-tally.js'
import type { Known } from './body-scan.js'

/** What one target's last sync left: its objects' digests and records, valid for bodies with the same fingerprint. */
export interface CacheEntry {
  namespace: string
  fingerprint: string
  /** The checksum of the report these records made, which the exporter took whole: what a report of changes applies to. */
  checksum: string
  /** The members of the body's objects: a member (or a span of them) whose bytes come again is known by its digest. */
  known: Known
  /** Each item's value is its JSON text, as the report carries it. */
  records: Map<string, ObjectRecord<string>>
  /** Their tally, which the next sync's tally starts from (retally). */
  tallied: Tallied<string>
  /** What the entry is charged: its strings' lengths and a fixed overhead per object. */
  bytes: number
  /** When it was kept (Date.now()). */
  at: number
  /** False when kept after a sync in which the records before did not help (every object had changed). */
  useful: boolean
  /** The first objects of the last body whose records were not kept, to see whether the next one is like it. */
  probe?: { key: string; digest: string }[]
}

/** The member, map entries, record objects and string headers of one object (measured on V8: about 400). */
const PER_OBJECT = 512
/** A base64 SHA-256. */
const DIGEST = 44

export function recordBytes(key: string, record: ObjectRecord<string>): number {
  // Its digest twice: its own, and its part of its span's digests (KnownSpan.digests).
  let n = PER_OBJECT + 2 * key.length + 2 * DIGEST + (record.failure?.length ?? 0) + (record.failedKey?.length ?? 0)
  if (record.item) {
    n += record.item.value.length + record.item.hash.length
    for (const part of record.item.order) n += part.length
  }
  return n
}

/**
 * The kept records of recent target syncs, by target (namespace/name/uid), least recently used
 * dropped first, within a byte budget of which one namespace's targets hold at most a share. A
 * target whose entry alone passes the share is not kept: its syncs extract every object, as
 * without the cache. A kept record is only ever used for an object whose bytes are the same,
 * under the same fingerprint (target spec, profile, scopes, the plural): what it gives back is
 * what extraction would give for those bytes, so it tells a caller nothing it did not send.
 */
export class ObjectCache {
  private readonly entries = new Map<string, CacheEntry>()
  private readonly byNamespace = new Map<string, number>()
  private total = 0

  /** What one namespace's targets may hold together. */
  readonly namespaceBytes: number

  constructor(readonly maxBytes: number, namespaceShare: number) {
    this.namespaceBytes = Math.floor(maxBytes * namespaceShare)
  }

  get enabled(): boolean {
    return this.maxBytes > 0
  }

  get bytes(): number {
    return this.total
  }

  get size(): number {
    return this.entries.size
  }

  get(target: string): CacheEntry | undefined {
    const entry = this.entries.get(target)
    if (!entry) return undefined
    // Most recently used last: the first is the one to drop.
    this.entries.delete(target)
    this.entries.set(target, entry)
    return entry
  }

  /** Keeps the entry if it fits its namespace's share; returns whether it was kept. */
  set(target: string, entry: CacheEntry): boolean {
    this.delete(target)
    const share = this.namespaceBytes
    if (entry.bytes > share) return false
    this.entries.set(target, entry)
    this.charge(entry.namespace, entry.bytes)
    for (const [key, other] of this.entries) {
      if ((this.byNamespace.get(entry.namespace) ?? 0) <= share) break
      if (key !== target && other.namespace === entry.namespace) this.delete(key)
    }
    for (const key of this.entries.keys()) {
      if (this.total <= this.maxBytes) break
      if (key !== target) this.delete(key)
    }
    return true
  }

  delete(target: string): void {
    const entry = this.entries.get(target)
    if (!entry) return
    this.entries.delete(target)
    this.charge(entry.namespace, -entry.bytes)
  }

  private charge(namespace: string, bytes: number): void {
    this.total += bytes
    const left = (this.byNamespace.get(namespace) ?? 0) + bytes
    if (left === 0) this.byNamespace.delete(namespace)
    else this.byNamespace.set(namespace, left)
  }
}
